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
 *
 * Arguments are read once and never coerced, and no JavaScript runs during a call: offsets and lengths must
 * be integers in range (a TypeError for a non-number; a RangeError for NaN, a fraction, a negative value or
 * one past the array), a CRC a 32-bit word (unsigned, or a signed int32), room 0..508, ptr 0..2^32-1.
 * crcFrames copies its spans into native memory before checking them and uses only the copy, and refuses
 * spans that share memory with bytes; copyMarked refuses a dst range that overlaps its src range.
 */
#include <isa-l/crc.h>
#include <node_api.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* The largest `room`: the octets between two Markers (RFC 5044 §4.3: one every 512, 4 octets each). */
#define MARKER_ROOM_MAX 508

#define CHECK(call)                                                                                     \
  do {                                                                                                  \
    if ((call) != napi_ok) return NULL;                                                                 \
  } while (0)

static napi_value throw_type(napi_env env, const char *msg) {
  napi_throw_type_error(env, NULL, msg);
  return NULL;
}

static napi_value throw_range(napi_env env, const char *msg) {
  napi_throw_range_error(env, NULL, msg);
  return NULL;
}

/* After an N-API call failed: its exception, or an Error saying `msg` when it left none pending. */
static napi_value pending(napi_env env, const char *msg) {
  bool is = false;
  if (napi_is_exception_pending(env, &is) == napi_ok && !is) napi_throw_error(env, NULL, msg);
  return NULL;
}

/* 2^53 - 1: every integer up to it is exact in a double. */
#define MAX_SAFE 9007199254740991.0

/*
 * The integer argument `v`, read once and never coerced (no valueOf): a non-number is a TypeError; NaN,
 * ±Infinity, a fraction or a value outside [lo, hi] (within ±2^53) a RangeError naming `what`.
 */
static bool integer_arg(napi_env env, napi_value v, double lo, double hi, const char *what, double *out) {
  double d = 0;
  napi_status s = napi_get_value_double(env, v, &d);
  if (s == napi_number_expected) return throw_type(env, what), false;
  if (s != napi_ok) return pending(env, what), false;
  if (!(d >= lo && d <= hi) || d != (double)(int64_t)d) return throw_range(env, what), false;
  *out = d;
  return true;
}

/* A CRC32c argument: a 32-bit word, unsigned (0..2^32-1) or as a signed int32 (-2^31..-1). */
static bool crc_arg(napi_env env, napi_value v, uint32_t *crc) {
  double d = 0;
  if (!integer_arg(env, v, INT32_MIN, UINT32_MAX, "crc must be an integer -2^31..2^32-1 (a CRC32c)", &d))
    return false;
  *crc = (uint32_t)(int64_t)d;
  return true;
}

/* A Marker placement argument: room 0..508 octets, ptr (FPDUPTR; its low 16 bits go out) 0..2^32-1. */
static bool marker_args(napi_env env, napi_value vroom, napi_value vptr, uint32_t *room, uint32_t *ptr) {
  double r = 0, p = 0;
  if (!integer_arg(env, vroom, 0, MARKER_ROOM_MAX, "room must be an integer 0..508 (octets)", &r) ||
      !integer_arg(env, vptr, 0, UINT32_MAX, "ptr must be an integer 0..2^32-1", &p))
    return false;
  *room = (uint32_t)r;
  *ptr = (uint32_t)p;
  return true;
}

/*
 * The octets and length of `value`, a Uint8Array, as they are now; false (a TypeError pending, naming
 * `what`) otherwise. Runs no JavaScript. A detached array has no octets (length 0, never dereferenced); a
 * view of a SharedArrayBuffer is taken as it is (such memory never shrinks or goes away while the view
 * lives; another thread may change its octets, never where they are).
 */
static bool uint8_array(napi_env env, napi_value value, const char *what, unsigned char **data, size_t *length) {
  bool is_ta = false;
  if (napi_is_typedarray(env, value, &is_ta) != napi_ok) return pending(env, what), false;
  if (!is_ta) return throw_type(env, what), false;
  napi_typedarray_type type;
  void *d = NULL;
  size_t n = 0;
  if (napi_get_typedarray_info(env, value, &type, &n, &d, NULL, NULL) != napi_ok) return pending(env, what), false;
  if (type != napi_uint8_array) return throw_type(env, what), false;
  *data = n > 0 && d != NULL ? (unsigned char *)d : (unsigned char *)"";
  *length = d != NULL ? n : 0;
  return true;
}

/* Whether [a, a + an) and [b, b + bn) share an octet. */
static bool overlap(const void *a, size_t an, const void *b, size_t bn) {
  const uintptr_t x = (uintptr_t)a, y = (uintptr_t)b;
  return an > 0 && bn > 0 && x < y + bn && y < x + an;
}

/*
 * The typed array and the [start, end) range of argv[0..2]; false (an exception pending) when invalid:
 * start and end integers, 0 <= start <= end <= length, at most 2^31-1 octets (ISA-L takes an int).
 */
static bool byte_range(napi_env env, napi_value *argv, unsigned char **bytes, int64_t *start, int64_t *end) {
  size_t length = 0;
  double s = 0, e = 0;
  if (!uint8_array(env, argv[0], "bytes must be a Uint8Array", bytes, &length)) return false;
  if (!integer_arg(env, argv[1], 0, MAX_SAFE, "start must be an integer 0..2^53-1 (a byte range of the array)", &s) ||
      !integer_arg(env, argv[2], 0, MAX_SAFE, "end must be an integer 0..2^53-1 (a byte range of the array)", &e))
    return false;
  if (e < s || e > (double)length || e - s > INT32_MAX) {
    napi_throw_range_error(env, NULL, "byte range outside the array");
    return false;
  }
  *start = (int64_t)s;
  *end = (int64_t)e;
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
  if (!byte_range(env, argv, &data, &start, &end) || !crc_arg(env, argv[3], &crc)) return NULL;
  uint32_t out = end > start ? crc32_iscsi(data + start, (int)(end - start), ~crc) ^ 0xffffffffu : crc;
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
  if (!byte_range(env, argv, &data, &start, &end) || !crc_arg(env, argv[3], &crc) ||
      !marker_args(env, argv[4], argv[5], &room, &ptr))
    return NULL;
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
  double off = 0;
  if (!integer_arg(env, argv[1], 0, MAX_SAFE, "dstOff must be an integer 0..2^53-1", &off)) return NULL;
  const uint64_t dst_off = (uint64_t)off;
  unsigned char *src = NULL;
  int64_t start = 0, end = 0;
  if (!byte_range(env, argv + 2, &src, &start, &end)) return NULL;
  uint32_t crc = 0, room = 0, ptr = 0;
  if (!crc_arg(env, argv[5], &crc) || !marker_args(env, argv[6], argv[7], &room, &ptr)) return NULL;
  int64_t left = end - start;
  int64_t markers = left > (int64_t)room ? (left - room + (MARKER_INTERVAL - MARKER_LENGTH) - 1) /
                                                (MARKER_INTERVAL - MARKER_LENGTH)
                                          : 0;
  const uint64_t need = (uint64_t)left + (uint64_t)markers * MARKER_LENGTH;
  if (dst_off > dst_length || need > dst_length - dst_off || need > INT32_MAX) {
    napi_throw_range_error(env, NULL, "dst cannot hold the copy and its Markers");
    return NULL;
  }
  /* What is written must not be what is read: a copy over its own source would read its Markers back. */
  if (overlap(dst_data + dst_off, (size_t)need, src + start, (size_t)left)) {
    napi_throw_range_error(env, NULL, "copyMarked: dst's range overlaps src's");
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
    memcpy(d, p, n);
    d += n;
    p += n;
    left -= n;
    room -= n;
    ptr += n;
  }
  /* One CRC pass over all of it (still in cache): one call, not one per 508-octet piece. */
  uint32_t out = d > d0 ? crc32_iscsi(d0, (int)(d - d0), ~crc) ^ 0xffffffffu : crc;
  napi_value result;
  CHECK(napi_create_uint32(env, out, &result));
  return result;
}

/* Spans copied on the stack up to this many frames (a sender's turn seals at most 256); more go to the heap. */
#define FRAMES_ON_STACK 256

/*
 * The spans are copied into native memory, checked there, and only the copy is used: a CRC written into
 * `bytes` can never change a span already checked. `spans` sharing memory with `bytes` is refused anyway
 * (a TypeError): it is never what a caller means.
 */
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
  if (napi_is_typedarray(env, argv[1], &is_ta) != napi_ok) return pending(env, "spans must be an Int32Array");
  if (!is_ta) return throw_type(env, "spans must be an Int32Array");
  if (napi_get_typedarray_info(env, argv[1], &type, &span_length, &span_data, NULL, NULL) != napi_ok)
    return pending(env, "spans must be an Int32Array");
  if (type != napi_int32_array) return throw_type(env, "spans must be an Int32Array");
  if (span_data == NULL) span_length = 0; /* detached */
  double dcount = 0;
  if (!integer_arg(env, argv[2], 0, UINT32_MAX, "count must be an integer 0..2^32-1", &dcount)) return NULL;
  const uint32_t count = (uint32_t)dcount;
  if ((uint64_t)count * 2 > span_length) return throw_range(env, "count exceeds the spans given");
  if (count == 0) return NULL;
  if (overlap(span_data, span_length * sizeof(int32_t), bytes, length))
    return throw_type(env, "crcFrames: spans must not share memory with bytes");
  int32_t small[2 * FRAMES_ON_STACK];
  int32_t *spans = count <= FRAMES_ON_STACK ? small : malloc((size_t)count * 2 * sizeof(int32_t));
  if (spans == NULL) {
    napi_throw_error(env, NULL, "crcFrames: out of memory");
    return NULL;
  }
  memcpy(spans, span_data, (size_t)count * 2 * sizeof(int32_t));
  /* Every span is checked before any CRC is written: a bad one changes nothing. */
  for (uint32_t i = 0; i < count; i++) {
    int64_t start = spans[2 * i], end = spans[2 * i + 1];
    if (start < 0 || end < start || (uint64_t)end + 4 > length) {
      if (spans != small) free(spans);
      return throw_range(env, "a frame's span lies outside the array");
    }
  }
  for (uint32_t i = 0; i < count; i++) {
    int32_t start = spans[2 * i], end = spans[2 * i + 1];
    uint32_t c = end > start ? crc32_iscsi(bytes + start, (int)(end - start), 0xffffffffu) ^ 0xffffffffu : 0;
    bytes[end] = (unsigned char)c;
    bytes[end + 1] = (unsigned char)(c >> 8);
    bytes[end + 2] = (unsigned char)(c >> 16);
    bytes[end + 3] = (unsigned char)(c >> 24);
  }
  if (spans != small) free(spans);
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
