/*
 * CRC32c (Castagnoli, the iSCSI polynomial 0x1EDC6F41) of a byte range of a typed array, through Intel
 * ISA-L's crc32_iscsi (which picks its PCLMULQDQ / AVX-512 folding kernel at run time).
 *
 * calculate(bytes, start, end, crc) -> CRC32c of bytes[start, end) continuing from `crc`, a finished
 * CRC32c of the preceding octets (0 to start): the same convention as @node-rs/crc32 and sse4_crc32.
 * Passing the range avoids creating a subarray per call in JavaScript.
 */
#include <isa-l/crc.h>
#include <node_api.h>
#include <stdint.h>

#define CHECK(call)                                                                                     \
  do {                                                                                                  \
    if ((call) != napi_ok) return NULL;                                                                 \
  } while (0)

static napi_value throw_type(napi_env env, const char *msg) {
  napi_throw_type_error(env, NULL, msg);
  return NULL;
}

static napi_value calculate(napi_env env, napi_callback_info info) {
  size_t argc = 4;
  napi_value argv[4];
  CHECK(napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
  if (argc < 4) return throw_type(env, "calculate(bytes, start, end, crc) takes four arguments");
  bool is_ta = false;
  CHECK(napi_is_typedarray(env, argv[0], &is_ta));
  if (!is_ta) return throw_type(env, "bytes must be a Uint8Array");
  napi_typedarray_type type;
  size_t length = 0;
  void *data = NULL;
  CHECK(napi_get_typedarray_info(env, argv[0], &type, &length, &data, NULL, NULL));
  if (type != napi_uint8_array) return throw_type(env, "bytes must be a Uint8Array");
  int64_t start = 0, end = 0;
  uint32_t crc = 0;
  CHECK(napi_get_value_int64(env, argv[1], &start));
  CHECK(napi_get_value_int64(env, argv[2], &end));
  CHECK(napi_get_value_uint32(env, argv[3], &crc));
  if (start < 0 || end < start || (uint64_t)end > length || end - start > INT32_MAX) {
    napi_throw_range_error(env, NULL, "byte range outside the array");
    return NULL;
  }
  uint32_t out = crc32_iscsi((unsigned char *)data + start, (int)(end - start), ~crc) ^ 0xffffffffu;
  napi_value result;
  CHECK(napi_create_uint32(env, out, &result));
  return result;
}

NAPI_MODULE_INIT() {
  napi_value fn;
  if (napi_create_function(env, "calculate", NAPI_AUTO_LENGTH, calculate, NULL, &fn) != napi_ok) return NULL;
  if (napi_set_named_property(env, exports, "calculate", fn) != napi_ok) return NULL;
  return exports;
}
