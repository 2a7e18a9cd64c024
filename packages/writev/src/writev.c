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
 *
 * Arguments are read once and never coerced: numbers must be integers in range (a TypeError for a
 * non-number, a RangeError for NaN, a fraction or out of range), the ranges are copied into native memory
 * before they are checked and only the copy is used, and each buffer a range names is read from `buffers`
 * once (a getter or a proxy runs then, never between a check and the send; write_ranges says in which order).
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

/* After an N-API call failed: its exception, or an Error saying `msg` when it left none pending. */
static napi_value pending(napi_env env, const char *msg) {
  bool is = false;
  if (napi_is_exception_pending(env, &is) == napi_ok && !is) napi_throw_error(env, NULL, msg);
  return NULL;
}

/* 2^53 - 1: every integer up to it is exact in a double. */
#define MAX_SAFE 9007199254740991.0

/*
 * The integer argument `v`, read once and never coerced (no valueOf, no getter): a non-number is a
 * TypeError; NaN, ±Infinity, a fraction or a value outside [lo, hi] (within ±2^53) a RangeError.
 */
static bool integer_arg(napi_env env, napi_value v, double lo, double hi, const char *msg, double *out) {
  double d = 0;
  napi_status s = napi_get_value_double(env, v, &d);
  if (s == napi_number_expected) return fail(env, false, msg), false;
  if (s != napi_ok) return pending(env, msg), false;
  if (!(d >= lo && d <= hi) || d != (double)(int64_t)d) return fail(env, true, msg), false;
  *out = d;
  return true;
}

/*
 * The octets of an ArrayBuffer or Uint8Array (its view) as they are now; false with an exception pending
 * otherwise. Runs no JavaScript. A detached buffer has no octets (length 0); a view of a SharedArrayBuffer
 * is taken as it is (such memory never shrinks or goes away while the view lives).
 */
static bool bytes_of(napi_env env, napi_value v, unsigned char **data, size_t *length) {
  bool is = false;
  void *d = NULL;
  size_t n = 0;
  if (napi_is_arraybuffer(env, v, &is) != napi_ok) return pending(env, "buffers: not readable"), false;
  if (is) {
    if (napi_get_arraybuffer_info(env, v, &d, &n) != napi_ok) return pending(env, "buffers: not readable"), false;
  } else {
    if (napi_is_typedarray(env, v, &is) != napi_ok) return pending(env, "buffers: not readable"), false;
    if (!is) return fail(env, false, "buffers must hold ArrayBuffers or Uint8Arrays"), false;
    napi_typedarray_type type;
    if (napi_get_typedarray_info(env, v, &type, &n, &d, NULL, NULL) != napi_ok)
      return pending(env, "buffers: not readable"), false;
    if (type != napi_uint8_array) return fail(env, false, "typed arrays in buffers must be Uint8Arrays"), false;
  }
  /* Nothing is ever read from an empty buffer (only empty ranges fit it); a non-NULL base keeps it simple. */
  *data = n > 0 && d != NULL ? d : (unsigned char *)"";
  *length = d != NULL ? n : 0;
  return true;
}

#define RANGE_FIELDS 5
#define MARKER_INTERVAL 512
#define MARKER_LENGTH 4
#define AFTER_MARKER (MARKER_INTERVAL - MARKER_LENGTH)

/* One range as it was read, once, from `ranges`: checked and sent from this copy only. */
typedef struct {
  double f[RANGE_FIELDS];
  uint32_t slot;   /* its buffer in the `held` list */
  unsigned char *p; /* its first octet, once its buffer's octets are known */
} record;

/* One element of `buffers` a range names, read once. */
typedef struct {
  uint32_t index;
  napi_value value;
  unsigned char *data;
  size_t size;
} held;

/* The numbers of a range, checked before any JavaScript runs; NULL when they are consistent. */
static const char *check_numbers(const double *f, uint32_t nb) {
  const double b = f[0], o = f[1], l = f[2], mk = f[3], wire = f[4];
  if (!(b >= 0 && b < (double)nb) || b != (double)(uint32_t)b) return "a range names no buffer given";
  if (!(o >= 0 && o <= MAX_SAFE && l >= 0 && l <= MAX_SAFE) || o != (double)(int64_t)o || l != (double)(int64_t)l)
    return "a range lies outside its buffer";
  if (mk == -1) return wire == l ? NULL : "a range's Markers or wire length are inconsistent";
  if (!(mk >= 0 && mk < (double)(AFTER_MARKER + 1) * 65536) || mk != (double)(uint32_t)mk)
    return "a range's Markers or wire length are inconsistent";
  const int64_t room = (int64_t)((uint32_t)mk >> 16), len = (int64_t)l;
  const int64_t markers = len > room ? (len - room + AFTER_MARKER - 1) / AFTER_MARKER : 0;
  if (wire != (double)(len + MARKER_LENGTH * markers)) return "a range's Markers or wire length are inconsistent";
  return NULL;
}

/* Where filling the iovec list stopped: record j, `skip` wire octets into it. */
typedef struct {
  uint32_t j;
  int64_t skip;
} cursor;

/*
 * Fills iov (and the Marker octets in `marks`) from `at` up to `end`; returns the pieces, their octets in
 * *want, and in *stop where the next fill starts. Reads only the checked records.
 */
static int fill(const record *rec, cursor at, uint32_t end, struct iovec *iov, unsigned char (*marks)[MARKER_LENGTH],
                size_t *want, cursor *stop) {
  int n = 0, m = 0;
  *want = 0;
  for (uint32_t k = at.j; k < end; k++) {
    const double *f = rec[k].f;
    unsigned char *p0 = rec[k].p;
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

/*
 * The order of work is what makes the call unsteerable: (1) every number and the ranges are read once
 * into native memory (no JavaScript can run: nothing is coerced) and checked there; (2) each element of
 * `buffers` a range names is read once (a getter may run here, and may change anything in JavaScript);
 * (3) only then are the buffers' octets located, their types and the ranges' bounds checked, and the
 * octets sent, with no JavaScript in between. What a getter changes in step 2 is either ignored (the
 * ranges, already copied) or seen (a buffer detached or shrunk: its length as it is now).
 */
static napi_value write_ranges(napi_env env, napi_callback_info info) {
  size_t argc = 6;
  napi_value argv[6];
  CHECK(napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
  if (argc < 6) return fail(env, false, "writeRanges(fd, buffers, ranges, first, count, skip) takes six arguments");
  double dfd = 0, dfirst = 0, dcount = 0, dskip = 0;
  if (!integer_arg(env, argv[0], 0, INT32_MAX, "fd must be a descriptor (an integer 0..2^31-1)", &dfd) ||
      !integer_arg(env, argv[3], 0, UINT32_MAX, "first must be an integer 0..2^32-1", &dfirst) ||
      !integer_arg(env, argv[4], 0, UINT32_MAX, "count must be an integer 0..2^32-1", &dcount) ||
      !integer_arg(env, argv[5], 0, MAX_SAFE, "skip must be an integer 0..2^53-1", &dskip))
    return NULL;
  const int fd = (int)dfd;
  const uint32_t first = (uint32_t)dfirst, count = (uint32_t)dcount;
  const int64_t skip = (int64_t)dskip;

  bool is = false;
  CHECK(napi_is_array(env, argv[1], &is));
  if (!is) return fail(env, false, "buffers must be an array");
  uint32_t nb = 0;
  if (napi_get_array_length(env, argv[1], &nb) != napi_ok) return pending(env, "buffers: no length");

  CHECK(napi_is_typedarray(env, argv[2], &is));
  if (!is) return fail(env, false, "ranges must be a Float64Array");
  napi_typedarray_type type;
  size_t rn = 0;
  void *rd = NULL;
  if (napi_get_typedarray_info(env, argv[2], &type, &rn, &rd, NULL, NULL) != napi_ok)
    return pending(env, "ranges: not readable");
  if (type != napi_float64_array) return fail(env, false, "ranges must be a Float64Array");
  if ((uint64_t)first + count > rn / RANGE_FIELDS) return fail(env, true, "first + count exceeds the ranges given");
  if (count == 0) {
    if (skip != 0) return fail(env, true, "skip lies outside the first range");
    napi_value zero;
    CHECK(napi_create_double(env, 0, &zero));
    return zero;
  }

  /* (1) The records, copied once; the hash of buffer indices (open addressing) to find each one's slot. */
  uint32_t cap = 16;
  while (cap < 2 * (uint64_t)count) cap *= 2;
  const size_t bytes = (size_t)count * (sizeof(record) + sizeof(held)) + (size_t)cap * sizeof(uint32_t);
  record *rec = malloc(bytes);
  if (rec == NULL) {
    napi_throw_error(env, NULL, "writeRanges: out of memory");
    return NULL;
  }
  held *hd = (held *)(rec + count);
  uint32_t *hash = (uint32_t *)(hd + count); /* slot + 1; 0 = empty */
  memset(hash, 0, (size_t)cap * sizeof *hash);
  const double *r = (const double *)rd + (size_t)RANGE_FIELDS * first;
  for (uint32_t k = 0; k < count; k++) memcpy(rec[k].f, r + (size_t)RANGE_FIELDS * k, sizeof rec[k].f);

  const char *bad = NULL;
  uint32_t nheld = 0;
  for (uint32_t k = 0; k < count && bad == NULL; k++) {
    bad = check_numbers(rec[k].f, nb);
    if (bad != NULL) break;
    const uint32_t bi = (uint32_t)rec[k].f[0];
    uint32_t h = (bi * 2654435761u) & (cap - 1);
    while (hash[h] != 0 && hd[hash[h] - 1].index != bi) h = (h + 1) & (cap - 1);
    if (hash[h] == 0) {
      hd[nheld].index = bi;
      hash[h] = ++nheld;
    }
    rec[k].slot = hash[h] - 1;
  }
  if (bad == NULL && !(skip < (int64_t)rec[0].f[4])) bad = "skip lies outside the first range";
  if (bad != NULL) {
    free(rec);
    return fail(env, true, bad);
  }

  /* (2) Each buffer a range names, read once: getters and proxies in the array run here, and only here. */
  for (uint32_t u = 0; u < nheld; u++)
    if (napi_get_element(env, argv[1], hd[u].index, &hd[u].value) != napi_ok) {
      free(rec);
      return pending(env, "buffers: an element could not be read");
    }
  /* (3) No JavaScript from here on: the buffers' octets as they are now, and every range against them. */
  for (uint32_t u = 0; u < nheld; u++)
    if (!bytes_of(env, hd[u].value, &hd[u].data, &hd[u].size)) {
      free(rec);
      return NULL;
    }
  for (uint32_t k = 0; k < count; k++) {
    const held *b = &hd[rec[k].slot];
    const uint64_t o = (uint64_t)rec[k].f[1], l = (uint64_t)rec[k].f[2];
    if (o > b->size || l > b->size - o) {
      free(rec);
      return fail(env, true, "a range lies outside its buffer");
    }
    rec[k].p = b->data + o;
  }

  struct iovec iov[IOVS];
  unsigned char marks[IOVS][MARKER_LENGTH];
  double total = 0;
  cursor at = {0, skip};
  while (at.j < count) {
    size_t want = 0;
    cursor next;
    int n = fill(rec, at, count, iov, marks, &want, &next);
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
  free(rec);
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
