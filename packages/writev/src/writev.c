/*
 * A gathered, non-blocking send of byte ranges straight to a socket descriptor (POSIX sendmsg with an
 * iovec list), for a transmit queue that keeps its own order: MPA's FPDUs with a Marker every 512 octets
 * (RFC 5044 §4.3) are ≈257 pieces each, which Node's stream API would take as one write per piece.
 *
 * writeRanges(fd, buffers, ranges, first, count, skip) -> octets sent (0 when the socket takes none now),
 * or -errno on a socket error with nothing sent. `buffers` is an array of ArrayBuffers or Uint8Arrays;
 * `ranges` a Float64Array of records of RANGE_FIELDS numbers: buffer index, byte offset (from the start of
 * the ArrayBuffer, or of the Uint8Array's view), length, Markers, wire length. Markers -1: the range goes
 * as it is. Otherwise room * 65536 + ptr: a 4-octet Marker (16 zero bits, FPDUPTR) goes in whenever
 * `room` octets of the range have passed, then every 508, its FPDUPTR `ptr` plus the wire octets of the
 * range before it (the first ptr + room, each next one 512 further: the placement calculateMarked and
 * copyMarked of @rddp/crc32c-isal use); the wire length is then
 * length + 4 per Marker. Ranges first .. first + count - 1 are sent in order, the first from `skip` wire
 * octets in. Every range is checked against its buffer before anything is sent; sendmsg takes IOV_MAX
 * pieces per call (MSG_DONTWAIT | MSG_NOSIGNAL) until the socket would block or all are sent.
 */
#include <errno.h>
#include <limits.h>
#include <node_api.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>

#ifndef IOV_MAX
#define IOV_MAX 1024
#endif
#define IOVS (IOV_MAX < 1024 ? IOV_MAX : 1024)

#define CHECK(call)                                                                                     \
  do {                                                                                                  \
    if ((call) != napi_ok) return NULL;                                                                 \
  } while (0)

static napi_value fail(napi_env env, bool range, const char *msg) {
  if (range) napi_throw_range_error(env, NULL, msg);
  else napi_throw_type_error(env, NULL, msg);
  return NULL;
}

/* The octets of an ArrayBuffer or typed array (its view); false with an exception pending otherwise. */
static bool bytes_of(napi_env env, napi_value v, unsigned char **data, size_t *length) {
  bool is = false;
  void *d = NULL;
  if (napi_is_arraybuffer(env, v, &is) != napi_ok) return false;
  if (is) {
    if (napi_get_arraybuffer_info(env, v, &d, length) != napi_ok) return false;
    *data = d;
    return true;
  }
  if (napi_is_typedarray(env, v, &is) != napi_ok) return false;
  if (!is) return fail(env, false, "buffers must hold ArrayBuffers or typed arrays"), false;
  napi_typedarray_type type;
  size_t n = 0;
  if (napi_get_typedarray_info(env, v, &type, &n, &d, NULL, NULL) != napi_ok) return false;
  if (type != napi_uint8_array) return fail(env, false, "typed arrays in buffers must be Uint8Arrays"), false;
  *data = d;
  *length = n;
  return true;
}

#define RANGE_FIELDS 5
#define MARKER_INTERVAL 512
#define MARKER_LENGTH 4
#define AFTER_MARKER (MARKER_INTERVAL - MARKER_LENGTH)

/* Where filling the iovec list stopped: range j, `skip` wire octets into it. */
typedef struct {
  uint32_t j;
  int64_t skip;
} cursor;

/*
 * Fills iov (and the Marker octets in `marks`) from `at` up to `end`; returns the pieces, their octets in
 * *want, and in *stop where the next fill starts.
 */
static int fill(const double *r, unsigned char **base, cursor at, uint32_t end, struct iovec *iov,
                unsigned char (*marks)[MARKER_LENGTH], size_t *want, cursor *stop) {
  int n = 0, m = 0;
  *want = 0;
  for (uint32_t k = at.j; k < end; k++) {
    const double *f = r + RANGE_FIELDS * k;
    unsigned char *p0 = base[(uint32_t)f[0]] + (size_t)f[1];
    const int64_t len = (int64_t)f[2];
    const int64_t s = k == at.j ? at.skip : 0;
    if (f[3] < 0) {
      if (len - s <= 0) continue;
      if (n == IOVS) {
        stop->j = k;
        stop->skip = s;
        return n;
      }
      iov[n].iov_base = p0 + s;
      iov[n].iov_len = (size_t)(len - s);
      *want += iov[n].iov_len;
      n++;
      continue;
    }
    uint32_t room = (uint32_t)f[3] >> 16, ptr = (uint32_t)f[3] & 0xffff;
    int64_t pos = 0, po = 0; /* wire offset, payload offset */
    while (po < len) {
      if (room == 0) {
        if (pos + MARKER_LENGTH > s) {
          if (n == IOVS) {
            stop->j = k;
            stop->skip = pos > s ? pos : s;
            return n;
          }
          unsigned char *mk = marks[m++];
          mk[0] = 0;
          mk[1] = 0;
          mk[2] = (unsigned char)(ptr >> 8);
          mk[3] = (unsigned char)ptr;
          int64_t cut = s > pos ? s - pos : 0;
          iov[n].iov_base = mk + cut;
          iov[n].iov_len = (size_t)(MARKER_LENGTH - cut);
          *want += iov[n].iov_len;
          n++;
        }
        pos += MARKER_LENGTH;
        ptr += MARKER_LENGTH;
        room = AFTER_MARKER;
      }
      int64_t piece = len - po < (int64_t)room ? len - po : (int64_t)room;
      if (pos + piece > s) {
        if (n == IOVS) {
          stop->j = k;
          stop->skip = pos > s ? pos : s;
          return n;
        }
        int64_t cut = s > pos ? s - pos : 0;
        iov[n].iov_base = p0 + po + cut;
        iov[n].iov_len = (size_t)(piece - cut);
        *want += iov[n].iov_len;
        n++;
      }
      pos += piece;
      po += piece;
      ptr += (uint32_t)piece;
      room -= (uint32_t)piece;
    }
  }
  stop->j = end;
  stop->skip = 0;
  return n;
}

static napi_value write_ranges(napi_env env, napi_callback_info info) {
  size_t argc = 6;
  napi_value argv[6];
  CHECK(napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
  if (argc < 6) return fail(env, false, "writeRanges(fd, buffers, ranges, first, count, skip) takes six arguments");
  int32_t fd = -1;
  uint32_t first = 0, count = 0;
  int64_t skip = 0;
  CHECK(napi_get_value_int32(env, argv[0], &fd));
  CHECK(napi_get_value_uint32(env, argv[3], &first));
  CHECK(napi_get_value_uint32(env, argv[4], &count));
  CHECK(napi_get_value_int64(env, argv[5], &skip));
  if (fd < 0) return fail(env, true, "fd must be a descriptor (>= 0)");

  bool is_array = false;
  CHECK(napi_is_array(env, argv[1], &is_array));
  if (!is_array) return fail(env, false, "buffers must be an array");
  uint32_t nb = 0;
  CHECK(napi_get_array_length(env, argv[1], &nb));

  bool is_ta = false;
  CHECK(napi_is_typedarray(env, argv[2], &is_ta));
  if (!is_ta) return fail(env, false, "ranges must be a Float64Array");
  napi_typedarray_type type;
  size_t rn = 0;
  void *rd = NULL;
  CHECK(napi_get_typedarray_info(env, argv[2], &type, &rn, &rd, NULL, NULL));
  if (type != napi_float64_array) return fail(env, false, "ranges must be a Float64Array");
  if ((uint64_t)first + count > rn / RANGE_FIELDS) return fail(env, true, "first + count exceeds the ranges given");
  const double *r = rd;

  /* Only the buffers the ranges name are looked at; every range is checked before anything is sent. */
  unsigned char **base = calloc(nb > 0 ? nb : 1, sizeof *base);
  size_t *size = calloc(nb > 0 ? nb : 1, sizeof *size);
  if (base == NULL || size == NULL) {
    free(base);
    free(size);
    napi_throw_error(env, NULL, "out of memory");
    return NULL;
  }
  const char *bad = NULL;
  bool pending = false;
  for (uint32_t j = first; j < first + count; j++) {
    const double *f = r + RANGE_FIELDS * j;
    double b = f[0], o = f[1], l = f[2], mk = f[3], wire = f[4];
    if (!(b >= 0 && b < nb && b == (uint32_t)b)) {
      bad = "a range names no buffer given";
      break;
    }
    uint32_t bi = (uint32_t)b;
    if (base[bi] == NULL) {
      napi_value v;
      if (napi_get_element(env, argv[1], bi, &v) != napi_ok || !bytes_of(env, v, &base[bi], &size[bi])) {
        pending = true;
        break;
      }
      if (base[bi] == NULL) base[bi] = (unsigned char *)""; /* an empty buffer: only empty ranges fit */
    }
    if (!(o >= 0 && l >= 0 && o + l <= (double)size[bi] && o == (int64_t)o && l == (int64_t)l)) {
      bad = "a range lies outside its buffer";
      break;
    }
    if (mk < 0 ? !(mk == -1 && wire == l)
               : !(mk == (uint32_t)mk && ((uint32_t)mk >> 16) <= AFTER_MARKER && wire ==
                     l + MARKER_LENGTH * (l > ((uint32_t)mk >> 16)
                                              ? (int64_t)((l - ((uint32_t)mk >> 16) + AFTER_MARKER - 1) / AFTER_MARKER)
                                              : 0))) {
      bad = "a range's Markers or wire length are inconsistent";
      break;
    }
  }
  if (bad == NULL && !pending && (count > 0 ? skip < 0 || (double)skip >= r[RANGE_FIELDS * first + 4] : skip != 0))
    bad = "skip lies outside the first range";
  if (bad != NULL || pending) {
    free(base);
    free(size);
    return bad != NULL ? fail(env, true, bad) : NULL;
  }

  struct iovec iov[IOVS];
  unsigned char marks[IOVS][MARKER_LENGTH];
  double total = 0;
  cursor at = {first, skip};
  const uint32_t end = first + count;
  while (at.j < end) {
    size_t want = 0;
    cursor next;
    int n = fill(r, base, at, end, iov, marks, &want, &next);
    if (n == 0) break;
    struct msghdr m;
    memset(&m, 0, sizeof m);
    m.msg_iov = iov;
    m.msg_iovlen = n;
    ssize_t w;
    do w = sendmsg(fd, &m, MSG_DONTWAIT | MSG_NOSIGNAL);
    while (w < 0 && errno == EINTR);
    if (w < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK || errno == ENOBUFS) break;
      if (total == 0) total = -(double)errno; /* else report what went; the error comes back on the next call */
      break;
    }
    total += (double)w;
    if ((size_t)w < want) break;
    at = next;
  }
  free(base);
  free(size);
  napi_value res;
  CHECK(napi_create_double(env, total, &res));
  return res;
}

/* src/congestion.c */
napi_value congestion_control(napi_env env, napi_callback_info info);
#ifdef __linux__
/* src/tun.c (Linux only) */
napi_value open_tun(napi_env env, napi_callback_info info);
napi_value watch_tun(napi_env env, napi_callback_info info);
#endif

NAPI_MODULE_INIT() {
  napi_value fn;
  if (napi_create_function(env, "writeRanges", NAPI_AUTO_LENGTH, write_ranges, NULL, &fn) != napi_ok) return NULL;
  if (napi_set_named_property(env, exports, "writeRanges", fn) != napi_ok) return NULL;
  if (napi_create_function(env, "congestionControl", NAPI_AUTO_LENGTH, congestion_control, NULL, &fn) != napi_ok)
    return NULL;
  if (napi_set_named_property(env, exports, "congestionControl", fn) != napi_ok) return NULL;
#ifdef __linux__
  if (napi_create_function(env, "openTun", NAPI_AUTO_LENGTH, open_tun, NULL, &fn) != napi_ok) return NULL;
  if (napi_set_named_property(env, exports, "openTun", fn) != napi_ok) return NULL;
  if (napi_create_function(env, "watchTun", NAPI_AUTO_LENGTH, watch_tun, NULL, &fn) != napi_ok) return NULL;
  if (napi_set_named_property(env, exports, "watchTun", fn) != napi_ok) return NULL;
#endif
  return exports;
}
