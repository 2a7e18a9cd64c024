/*
 * congestionControl(fd[, name]) -> the TCP congestion control in effect on socket `fd` (a string), or -errno.
 * With `name`, sets it first (Linux TCP_CONGESTION; the kernel refuses a name it has not loaded with ENOENT,
 * and, without CAP_NET_ADMIN, one outside net.ipv4.tcp_allowed_congestion_control with EPERM). Where the
 * option does not exist: -ENOPROTOOPT. Throws a TypeError when an argument is malformed: fd not an integer
 * 0..2^31-1 (never truncated), name not a string of 1..15 octets without NUL (its whole length is checked
 * before it is copied, so a longer one is refused, not cut short).
 */
#include <errno.h>
#include <stdint.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <node_api.h>
#include <string.h>
#include <sys/socket.h>

/* TCP_CA_NAME_MAX in the kernel: 16 octets with the terminating zero. */
#define NAME_MAX_LEN 16

static napi_value result_errno(napi_env env, int e) {
  napi_value v;
  if (napi_create_int32(env, -e, &v) != napi_ok) return NULL;
  return v;
}

napi_value congestion_control(napi_env env, napi_callback_info info) {
  size_t argc = 2;
  napi_value argv[2];
  if (napi_get_cb_info(env, info, &argc, argv, NULL, NULL) != napi_ok) return NULL;
  /* fd: an integer 0..2^31-1, never truncated or coerced (1.5, 2^32 + 3, NaN would name another descriptor). */
  double d = -1;
  napi_valuetype t;
  if (argc < 1 || napi_typeof(env, argv[0], &t) != napi_ok || t != napi_number ||
      napi_get_value_double(env, argv[0], &d) != napi_ok || !(d >= 0 && d <= INT32_MAX) || d != (double)(int32_t)d) {
    napi_throw_type_error(env, NULL, "congestionControl(fd, name?): fd must be a descriptor number");
    return NULL;
  }
  const int fd = (int)d;
  char name[NAME_MAX_LEN + 1];
  bool set = false;
  if (argc >= 2 && napi_typeof(env, argv[1], &t) == napi_ok && t != napi_undefined) {
    /* Its whole length first: a copy into `name` would cut a longer string short (at a UTF-8 boundary). */
    size_t n = 0, full = 0;
    if (t != napi_string || napi_get_value_string_utf8(env, argv[1], NULL, 0, &full) != napi_ok || full == 0 ||
        full >= NAME_MAX_LEN || napi_get_value_string_utf8(env, argv[1], name, sizeof name, &n) != napi_ok ||
        n != full || strlen(name) != n) {
      napi_throw_type_error(env, NULL,
                            "congestionControl(fd, name?): name must be a string of 1..15 octets, no NUL");
      return NULL;
    }
    set = true;
  }
#ifdef TCP_CONGESTION
  if (set && setsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, name, (socklen_t)strlen(name)) < 0)
    return result_errno(env, errno);
  char now[NAME_MAX_LEN + 1];
  socklen_t len = NAME_MAX_LEN;
  memset(now, 0, sizeof now);
  if (getsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, now, &len) < 0) return result_errno(env, errno);
  napi_value out;
  if (napi_create_string_utf8(env, now, strnlen(now, NAME_MAX_LEN), &out) != napi_ok) return NULL;
  return out;
#else
  (void)set;
  return result_errno(env, ENOPROTOOPT);
#endif
}
