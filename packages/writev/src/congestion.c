/*
 * congestionControl(fd[, name]) -> the TCP congestion control in effect on socket `fd` (a string), or -errno.
 * With `name`, sets it first (Linux TCP_CONGESTION; the kernel refuses a name it has not loaded with ENOENT,
 * and, without CAP_NET_ADMIN, one outside net.ipv4.tcp_allowed_congestion_control with EPERM). Where the
 * option does not exist: -ENOPROTOOPT. Throws a TypeError when an argument is malformed.
 */
#include <errno.h>
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
  int32_t fd = -1;
  napi_valuetype t;
  if (argc < 1 || napi_typeof(env, argv[0], &t) != napi_ok || t != napi_number ||
      napi_get_value_int32(env, argv[0], &fd) != napi_ok || fd < 0) {
    napi_throw_type_error(env, NULL, "congestionControl(fd, name?): fd must be a descriptor number");
    return NULL;
  }
  char name[NAME_MAX_LEN + 1];
  bool set = false;
  if (argc >= 2 && napi_typeof(env, argv[1], &t) == napi_ok && t != napi_undefined) {
    size_t n = 0;
    if (t != napi_string || napi_get_value_string_utf8(env, argv[1], name, sizeof name, &n) != napi_ok || n == 0 ||
        n >= NAME_MAX_LEN) {
      napi_throw_type_error(env, NULL, "congestionControl(fd, name?): name must be a string of 1..15 octets");
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
