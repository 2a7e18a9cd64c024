/*
 * CRC32c (Castagnoli, the iSCSI polynomial 0x1EDC6F41) of a byte range of a typed array, through Intel
 * ISA-L's crc32_iscsi (which picks its PCLMULQDQ / AVX-512 folding kernel at run time).
 *
 * calculate(bytes, start, end, crc) -> CRC32c of bytes[start, end) continuing from `crc`, a finished
 * CRC32c of the preceding octets (0 to start): the same convention as @node-rs/crc32 and sse4_crc32.
 * Passing the range avoids creating a subarray per call in JavaScript.
 *
 * calculateMarked(bytes, start, end, crc, room, ptr) -> the same CRC over bytes[start, end) as MPA puts
 * them on the wire with Markers (RFC 5044 §4.3): a 4-octet Marker (16 reserved zero bits, then FPDUPTR)
 * goes in whenever `room` octets have passed, the first one carrying FPDUPTR `ptr`; after each Marker,
 * FPDUPTR grows by 4 + the 508 octets to the next one. One call per ULPDU part instead of one per
 * 508-octet piece and Marker (the CRC covers the Markers, §4.4).
 *
 * copyMarked(dst, dstOff, src, start, end, crc, room, ptr) -> copies src[start, end) to dst at dstOff with
 * the Markers calculateMarked accounts for put in their places (16 zero bits, then FPDUPTR), and returns
 * the CRC32c continuing from `crc` over what it wrote: MPA framing by copy (one socket chunk per FPDU),
 * the CRC taken in one pass once the copy is in cache. dst must hold all of it (checked first).
 *
 * crcFrames(bytes, spans, count) -> undefined: for each of `count` frames, spans[2i] and spans[2i+1] (an
 * Int32Array) bound its octets [start, end); their CRC32c goes into bytes[end, end + 4), least significant
 * octet first (the MPA CRC field as siw and Wireshark have it, RFC 5044 §4.4). One call for every small
 * FPDU an event-loop turn framed, instead of one call each.
 */
#include <isa-l/crc.h>
#include <node_api.h>
#include <stdint.h>
#include <string.h>

#define CHECK(call)                                                                                     \
  do {                                                                                                  \
    if ((call) != napi_ok) return NULL;                                                                 \
  } while (0)

static napi_value throw_type(napi_env env, const char *msg) {
  napi_throw_type_error(env, NULL, msg);
  return NULL;
}

/* The octets and length of `value`, a Uint8Array; false (a TypeError pending, naming `what`) otherwise. */
static bool uint8_array(napi_env env, napi_value value, const char *what, unsigned char **data, size_t *length) {
  bool is_ta = false;
  if (napi_is_typedarray(env, value, &is_ta) != napi_ok) return false;
  if (!is_ta) return throw_type(env, what), false;
  napi_typedarray_type type;
  void *d = NULL;
  if (napi_get_typedarray_info(env, value, &type, length, &d, NULL, NULL) != napi_ok) return false;
  if (type != napi_uint8_array) return throw_type(env, what), false;
  *data = (unsigned char *)d;
  return true;
}

/* The typed array and the [start, end) range of argv[0..2]; false (an exception pending) when invalid. */
static bool byte_range(napi_env env, napi_value *argv, unsigned char **bytes, int64_t *start, int64_t *end) {
  size_t length = 0;
  if (!uint8_array(env, argv[0], "bytes must be a Uint8Array", bytes, &length)) return false;
  if (napi_get_value_int64(env, argv[1], start) != napi_ok || napi_get_value_int64(env, argv[2], end) != napi_ok)
    return false;
  if (*start < 0 || *end < *start || (uint64_t)*end > length || *end - *start > INT32_MAX) {
    napi_throw_range_error(env, NULL, "byte range outside the array");
    return false;
  }
  return true;
}

static napi_value calculate(napi_env env, napi_callback_info info) {
  size_t argc = 4;
  napi_value argv[4];
  CHECK(napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
  if (argc < 4) return throw_type(env, "calculate(bytes, start, end, crc) takes four arguments");
  unsigned char *data = NULL;
  int64_t start = 0, end = 0;
  uint32_t crc = 0;
  if (!byte_range(env, argv, &data, &start, &end)) return NULL;
  CHECK(napi_get_value_uint32(env, argv[3], &crc));
  uint32_t out = crc32_iscsi(data + start, (int)(end - start), ~crc) ^ 0xffffffffu;
  napi_value result;
  CHECK(napi_create_uint32(env, out, &result));
  return result;
}

#define MARKER_INTERVAL 512
#define MARKER_LENGTH 4
#define AFTER_MARKER (MARKER_INTERVAL - MARKER_LENGTH)

/* A Marker's 4 octets (16 zero bits, FPDUPTR; RFC 5044 §4.2) as a little-endian word, for crc32 on a word. */
static inline uint32_t marker_word(uint32_t ptr) {
  return ((ptr >> 8) & 0xff) << 16 | (ptr & 0xff) << 24;
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <nmmintrin.h>
#define HW_PERIODS 1
/*
 * Full 512-octet periods (a Marker and the 508 octets after it) by the SSE4.2 crc32 instruction, three
 * periods at a time on independent registers (its latency is 3 cycles, its throughput 1), joined by
 * linearity: crc(r, period) = crc(0, period) ^ crc(r, 512 zero octets), the latter a table lookup per octet
 * of r. ISA-L's call per 508-octet piece costs ≈55 ns; this ≈10.
 */
static uint32_t shift512[4][256];
static bool hw_ready = false;

__attribute__((target("sse4.2"))) static uint32_t zeros512(uint32_t r) {
  uint64_t c = r;
  for (int i = 0; i < MARKER_INTERVAL / 8; i++) c = _mm_crc32_u64(c, 0);
  return (uint32_t)c;
}

__attribute__((target("sse4.2"))) static void hw_init(void) {
  if (!__builtin_cpu_supports("sse4.2")) return;
  for (int k = 0; k < 4; k++)
    for (uint32_t v = 0; v < 256; v++) shift512[k][v] = zeros512(v << (8 * k));
  hw_ready = true;
}

static inline uint32_t shift_512(uint32_t r) {
  return shift512[0][r & 0xff] ^ shift512[1][(r >> 8) & 0xff] ^ shift512[2][(r >> 16) & 0xff] ^ shift512[3][r >> 24];
}

static inline uint64_t load64(const unsigned char *p) {
  uint64_t v;
  memcpy(&v, p, 8);
  return v;
}
static inline uint32_t load32(const unsigned char *p) {
  uint32_t v;
  memcpy(&v, p, 4);
  return v;
}

/* crc(0, Marker(ptr) || p[0, 508)) on one register. */
__attribute__((target("sse4.2"))) static inline uint32_t period1(const unsigned char *p, uint32_t ptr) {
  uint64_t c = _mm_crc32_u32(0, marker_word(ptr));
  for (int i = 0; i < 504; i += 8) c = _mm_crc32_u64(c, load64(p + i));
  return _mm_crc32_u32((uint32_t)c, load32(p + 504));
}

/* `k` full periods from `p`, the first Marker with FPDUPTR `ptr`; continues the register `c`. */
__attribute__((target("sse4.2"))) static uint32_t periods(const unsigned char *p, int64_t k, uint32_t ptr,
                                                          uint32_t c) {
  for (; k >= 3; k -= 3, p += 3 * AFTER_MARKER, ptr += 3 * MARKER_INTERVAL) {
    const unsigned char *p1 = p + AFTER_MARKER, *p2 = p + 2 * AFTER_MARKER;
    uint64_t a = _mm_crc32_u32(0, marker_word(ptr));
    uint64_t b = _mm_crc32_u32(0, marker_word(ptr + MARKER_INTERVAL));
    uint64_t d = _mm_crc32_u32(0, marker_word(ptr + 2 * MARKER_INTERVAL));
    for (int i = 0; i < 504; i += 8) {
      a = _mm_crc32_u64(a, load64(p + i));
      b = _mm_crc32_u64(b, load64(p1 + i));
      d = _mm_crc32_u64(d, load64(p2 + i));
    }
    a = _mm_crc32_u32((uint32_t)a, load32(p + 504));
    b = _mm_crc32_u32((uint32_t)b, load32(p1 + 504));
    d = _mm_crc32_u32((uint32_t)d, load32(p2 + 504));
    c = shift_512(c) ^ (uint32_t)a;
    c = shift_512(c) ^ (uint32_t)b;
    c = shift_512(c) ^ (uint32_t)d;
  }
  for (; k > 0; k--, p += AFTER_MARKER, ptr += MARKER_INTERVAL) c = shift_512(c) ^ period1(p, ptr);
  return c;
}
#else
#define HW_PERIODS 0
static void hw_init(void) {}
#endif

/*
 * CRC32c continuing from `crc` over n octets at p as they go on the wire with Markers: one whenever `room`
 * octets have passed, FPDUPTR counting from `ptr` at p's first octet (RFC 5044 §4.3, §4.4).
 */
static uint32_t marked_crc(const unsigned char *p, int64_t left, uint32_t crc, uint32_t room, uint32_t ptr) {
  uint32_t c = ~crc;
  if (room > 0 && left > 0) {
    uint32_t n = left < (int64_t)room ? (uint32_t)left : room;
    c = crc32_iscsi((unsigned char *)p, (int)n, c);
    p += n;
    left -= n;
    ptr += n;
  }
#if HW_PERIODS
  if (hw_ready && left >= AFTER_MARKER) {
    int64_t k = left / AFTER_MARKER;
    c = periods(p, k, ptr, c);
    p += k * AFTER_MARKER;
    left -= k * AFTER_MARKER;
    ptr += (uint32_t)k * MARKER_INTERVAL;
  }
#endif
  while (left > 0) {
    unsigned char marker[MARKER_LENGTH] = {0, 0, (unsigned char)(ptr >> 8), (unsigned char)ptr};
    c = crc32_iscsi(marker, MARKER_LENGTH, c);
    ptr += MARKER_LENGTH;
    uint32_t n = left < AFTER_MARKER ? (uint32_t)left : AFTER_MARKER;
    c = crc32_iscsi((unsigned char *)p, (int)n, c);
    p += n;
    left -= n;
    ptr += n;
  }
  return c ^ 0xffffffffu;
}

static napi_value calculate_marked(napi_env env, napi_callback_info info) {
  size_t argc = 6;
  napi_value argv[6];
  CHECK(napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
  if (argc < 6) return throw_type(env, "calculateMarked(bytes, start, end, crc, room, ptr) takes six arguments");
  unsigned char *data = NULL;
  int64_t start = 0, end = 0;
  uint32_t crc = 0, room = 0, ptr = 0;
  if (!byte_range(env, argv, &data, &start, &end)) return NULL;
  CHECK(napi_get_value_uint32(env, argv[3], &crc));
  CHECK(napi_get_value_uint32(env, argv[4], &room));
  CHECK(napi_get_value_uint32(env, argv[5], &ptr));
  if (room > MARKER_INTERVAL - MARKER_LENGTH) {
    napi_throw_range_error(env, NULL, "room must be 0..508 octets");
    return NULL;
  }
  napi_value result;
  CHECK(napi_create_uint32(env, marked_crc(data + start, end - start, crc, room, ptr), &result));
  return result;
}

static napi_value copy_marked(napi_env env, napi_callback_info info) {
  size_t argc = 8;
  napi_value argv[8];
  CHECK(napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
  if (argc < 8)
    return throw_type(env, "copyMarked(dst, dstOff, src, start, end, crc, room, ptr) takes eight arguments");
  unsigned char *dst_data = NULL;
  size_t dst_length = 0;
  if (!uint8_array(env, argv[0], "dst must be a Uint8Array", &dst_data, &dst_length)) return NULL;
  int64_t dst_off = 0;
  CHECK(napi_get_value_int64(env, argv[1], &dst_off));
  unsigned char *src = NULL;
  int64_t start = 0, end = 0;
  if (!byte_range(env, argv + 2, &src, &start, &end)) return NULL;
  uint32_t crc = 0, room = 0, ptr = 0;
  CHECK(napi_get_value_uint32(env, argv[5], &crc));
  CHECK(napi_get_value_uint32(env, argv[6], &room));
  CHECK(napi_get_value_uint32(env, argv[7], &ptr));
  if (room > MARKER_INTERVAL - MARKER_LENGTH) {
    napi_throw_range_error(env, NULL, "room must be 0..508 octets");
    return NULL;
  }
  int64_t left = end - start;
  int64_t markers = left > (int64_t)room ? (left - room + (MARKER_INTERVAL - MARKER_LENGTH) - 1) /
                                                (MARKER_INTERVAL - MARKER_LENGTH)
                                          : 0;
  if (dst_off < 0 || (uint64_t)dst_off + (uint64_t)left + (uint64_t)markers * MARKER_LENGTH > dst_length) {
    napi_throw_range_error(env, NULL, "dst cannot hold the copy and its Markers");
    return NULL;
  }
  const unsigned char *p = src + start;
  unsigned char *const d0 = dst_data + dst_off;
  unsigned char *d = d0;
  while (left > 0) {
    if (room == 0) {
      d[0] = 0;
      d[1] = 0;
      d[2] = (unsigned char)(ptr >> 8);
      d[3] = (unsigned char)ptr;
      d += MARKER_LENGTH;
      ptr += MARKER_LENGTH;
      room = MARKER_INTERVAL - MARKER_LENGTH;
    }
    uint32_t n = left < (int64_t)room ? (uint32_t)left : room;
    memmove(d, p, n);
    d += n;
    p += n;
    left -= n;
    room -= n;
    ptr += n;
  }
  /* One CRC pass over all of it (still in cache): one call, not one per 508-octet piece. */
  uint32_t out = crc32_iscsi(d0, (int)(d - d0), ~crc) ^ 0xffffffffu;
  napi_value result;
  CHECK(napi_create_uint32(env, out, &result));
  return result;
}

static napi_value crc_frames(napi_env env, napi_callback_info info) {
  size_t argc = 3;
  napi_value argv[3];
  CHECK(napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
  if (argc < 3) return throw_type(env, "crcFrames(bytes, spans, count) takes three arguments");
  unsigned char *bytes = NULL;
  size_t length = 0, span_length = 0;
  if (!uint8_array(env, argv[0], "bytes must be a Uint8Array", &bytes, &length)) return NULL;
  bool is_ta = false;
  napi_typedarray_type type;
  void *span_data = NULL;
  CHECK(napi_is_typedarray(env, argv[1], &is_ta));
  if (!is_ta) return throw_type(env, "spans must be an Int32Array");
  CHECK(napi_get_typedarray_info(env, argv[1], &type, &span_length, &span_data, NULL, NULL));
  if (type != napi_int32_array) return throw_type(env, "spans must be an Int32Array");
  uint32_t count = 0;
  CHECK(napi_get_value_uint32(env, argv[2], &count));
  if ((uint64_t)count * 2 > span_length) {
    napi_throw_range_error(env, NULL, "count exceeds the spans given");
    return NULL;
  }
  const int32_t *spans = (const int32_t *)span_data;
  /* Every span is checked before any CRC is written: a bad one changes nothing. */
  for (uint32_t i = 0; i < count; i++) {
    int64_t start = spans[2 * i], end = spans[2 * i + 1];
    if (start < 0 || end < start || (uint64_t)end + 4 > length) {
      napi_throw_range_error(env, NULL, "a frame's span lies outside the array");
      return NULL;
    }
  }
  for (uint32_t i = 0; i < count; i++) {
    int32_t start = spans[2 * i], end = spans[2 * i + 1];
    uint32_t c = crc32_iscsi(bytes + start, (int)(end - start), 0xffffffffu) ^ 0xffffffffu;
    bytes[end] = (unsigned char)c;
    bytes[end + 1] = (unsigned char)(c >> 8);
    bytes[end + 2] = (unsigned char)(c >> 16);
    bytes[end + 3] = (unsigned char)(c >> 24);
  }
  return NULL;
}

NAPI_MODULE_INIT() {
  hw_init();
  napi_value fn;
  if (napi_create_function(env, "calculate", NAPI_AUTO_LENGTH, calculate, NULL, &fn) != napi_ok) return NULL;
  if (napi_set_named_property(env, exports, "calculate", fn) != napi_ok) return NULL;
  if (napi_create_function(env, "calculateMarked", NAPI_AUTO_LENGTH, calculate_marked, NULL, &fn) != napi_ok)
    return NULL;
  if (napi_set_named_property(env, exports, "calculateMarked", fn) != napi_ok) return NULL;
  if (napi_create_function(env, "copyMarked", NAPI_AUTO_LENGTH, copy_marked, NULL, &fn) != napi_ok) return NULL;
  if (napi_set_named_property(env, exports, "copyMarked", fn) != napi_ok) return NULL;
  if (napi_create_function(env, "crcFrames", NAPI_AUTO_LENGTH, crc_frames, NULL, &fn) != napi_ok) return NULL;
  if (napi_set_named_property(env, exports, "crcFrames", fn) != napi_ok) return NULL;
  return exports;
}
