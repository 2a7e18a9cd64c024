/*
 * TUN devices for rddp experiment's packet relay (Linux).
 *
 * openTun(name[, netnsPath]) -> a descriptor attached to the existing TUN device `name` (IFF_TUN |
 * IFF_NO_PI: each read or write is one IP packet, no header). /dev/net/tun is opened O_RDWR | O_CLOEXEC,
 * blocking. With `netnsPath` (/run/netns/NAME, /proc/PID/ns/net) the calling thread enters that network
 * namespace for the open and the TUNSETIFF and always returns to its own one afterwards: the descriptor
 * belongs to the device's namespace, the process stays where it was. The device must exist already
 * (`ip tuntap add dev NAME mode tun`: persistent); TUNSETIFF would otherwise create a new one, so a name
 * the namespace does not know is an ENODEV error, and so is a device that turns out not to be persistent.
 * A failed step throws an Error naming it, with `code` its errno name ('ENODEV', 'ENOENT', 'EPERM', ...).
 *
 * watchTun(fd, onPacket, onError) reads packets from `fd` on the JS thread as they arrive (a libuv poll
 * handle; the descriptor becomes non-blocking): onPacket(packet) for each, a Buffer of its octets, at most
 * WATCH_BUDGET per wake so timers run between bursts. A read error other than EAGAIN / EINTR stops the
 * watch and calls onError(error). Returns a function that stops it (idempotent; nothing is read after it):
 * close the descriptor only after that. No thread pool read is ever left blocked on the descriptor, so the
 * process can exit.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <net/if.h> /* before linux/if_tun.h: struct ifreq, if_nametoindex */
#include <linux/if_tun.h>
#include <node_api.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>
#include <uv.h>

#define CHECK(call)                                                                                     \
  do {                                                                                                  \
    if ((call) != napi_ok) return NULL;                                                                 \
  } while (0)

/* IFNAMSIZ (16) with the terminating zero. */
#define NAME_MAX_LEN (IFNAMSIZ - 1)
/* Largest IP packet (an IPv4 total length, or an IPv6 payload without jumbograms, plus its header). */
#define PACKET_MAX 65536
/* Packets read per poll wake before returning to the event loop. */
#define WATCH_BUDGET 64

/* An Error with `code` the errno name of `e` and message "openTun: <what>: <strerror>". */
static napi_value throw_errno(napi_env env, const char *fn, const char *what, int e) {
  char code[32];
  char msg[512];
  uv_err_name_r(-e, code, sizeof code);
  snprintf(msg, sizeof msg, "%s: %s: %s", fn, what, strerror(e));
  napi_throw_error(env, code, msg);
  return NULL;
}

static napi_value errno_error(napi_env env, const char *fn, const char *what, int e) {
  char code[32];
  char msg[512];
  uv_err_name_r(-e, code, sizeof code);
  snprintf(msg, sizeof msg, "%s: %s: %s", fn, what, strerror(e));
  napi_value c, m, err;
  if (napi_create_string_utf8(env, code, NAPI_AUTO_LENGTH, &c) != napi_ok) return NULL;
  if (napi_create_string_utf8(env, msg, NAPI_AUTO_LENGTH, &m) != napi_ok) return NULL;
  if (napi_create_error(env, c, m, &err) != napi_ok) return NULL;
  return err;
}

/* Opens /dev/net/tun and attaches it to the persistent device `name` in the current thread's namespace. */
static int attach(const char *name, const char **step) {
  if (if_nametoindex(name) == 0) {
    *step = "no such network device";
    return errno == ENXIO || errno == ENOENT || errno == 0 ? -ENODEV : -errno;
  }
  int fd = open("/dev/net/tun", O_RDWR | O_CLOEXEC);
  if (fd < 0) {
    *step = "opening /dev/net/tun";
    return -errno;
  }
  struct ifreq ifr;
  memset(&ifr, 0, sizeof ifr);
  ifr.ifr_flags = IFF_TUN | IFF_NO_PI;
  memcpy(ifr.ifr_name, name, strlen(name));
  if (ioctl(fd, TUNSETIFF, &ifr) < 0) {
    int e = errno;
    close(fd);
    *step = "TUNSETIFF";
    return -e;
  }
  /* Gone between the check and TUNSETIFF, which then made a new device: closing the descriptor removes it. */
  memset(&ifr, 0, sizeof ifr);
  if (ioctl(fd, TUNGETIFF, &ifr) < 0 || !(ifr.ifr_flags & IFF_PERSIST)) {
    close(fd);
    *step = "no such network device (not persistent)";
    return -ENODEV;
  }
  return fd;
}

napi_value open_tun(napi_env env, napi_callback_info info) {
  size_t argc = 2;
  napi_value argv[2];
  CHECK(napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
  napi_valuetype t;
  char name[NAME_MAX_LEN + 2];
  size_t n = 0;
  if (argc < 1 || napi_typeof(env, argv[0], &t) != napi_ok || t != napi_string) {
    napi_throw_type_error(env, NULL, "openTun(name, netnsPath?): name must be a string");
    return NULL;
  }
  /* The whole length first: copying into `name` alone would cut a longer name short at a UTF-8 boundary. */
  size_t full = 0;
  CHECK(napi_get_value_string_utf8(env, argv[0], NULL, 0, &full));
  if (full <= NAME_MAX_LEN) CHECK(napi_get_value_string_utf8(env, argv[0], name, sizeof name, &n));
  if (n == 0 || n != full || n > NAME_MAX_LEN || strlen(name) != n || strchr(name, '/') != NULL) {
    napi_throw_range_error(env, NULL, "openTun(name, netnsPath?): name must be 1..15 octets, no NUL or '/'");
    return NULL;
  }
  char path[PATH_MAX];
  bool inNs = false;
  if (argc >= 2 && napi_typeof(env, argv[1], &t) == napi_ok && t != napi_undefined) {
    if (t != napi_string) {
      napi_throw_type_error(env, NULL, "openTun(name, netnsPath?): netnsPath must be a string");
      return NULL;
    }
    n = 0;
    CHECK(napi_get_value_string_utf8(env, argv[1], NULL, 0, &full));
    if (full < sizeof path - 1) CHECK(napi_get_value_string_utf8(env, argv[1], path, sizeof path, &n));
    if (n == 0 || n != full || n >= sizeof path - 1 || strlen(path) != n) {
      napi_throw_range_error(env, NULL, "openTun(name, netnsPath?): netnsPath must be a path of 1..4094 octets");
      return NULL;
    }
    inNs = true;
  }
  if (!inNs) {
    const char *step = NULL;
    int fd = attach(name, &step);
    if (fd < 0) {
      char what[128];
      snprintf(what, sizeof what, "%s %s", step, name);
      return throw_errno(env, "openTun", what, -fd);
    }
    napi_value out;
    CHECK(napi_create_int32(env, fd, &out));
    return out;
  }
  /* setns(CLONE_NEWNET) moves this thread only; its own namespace is restored before returning. */
  int saved = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
  if (saved < 0) return throw_errno(env, "openTun", "opening /proc/thread-self/ns/net", errno);
  int target = open(path, O_RDONLY | O_CLOEXEC);
  if (target < 0) {
    int e = errno;
    close(saved);
    char what[PATH_MAX + 32];
    snprintf(what, sizeof what, "opening %s", path);
    return throw_errno(env, "openTun", what, e);
  }
  if (setns(target, CLONE_NEWNET) < 0) {
    int e = errno;
    close(target);
    close(saved);
    char what[PATH_MAX + 48];
    snprintf(what, sizeof what, "entering network namespace %s", path);
    return throw_errno(env, "openTun", what, e);
  }
  close(target);
  const char *step = NULL;
  int fd = attach(name, &step);
  int e = fd < 0 ? -fd : 0;
  if (setns(saved, CLONE_NEWNET) < 0) {
    /* This thread's sockets would now open in the other namespace: no way to go on safely. */
    napi_fatal_error("openTun", NAPI_AUTO_LENGTH, "cannot return to the thread's own network namespace",
                     NAPI_AUTO_LENGTH);
  }
  close(saved);
  if (fd < 0) {
    char what[PATH_MAX + 160];
    snprintf(what, sizeof what, "%s %s in %s", step, name, path);
    return throw_errno(env, "openTun", what, e);
  }
  napi_value out;
  CHECK(napi_create_int32(env, fd, &out));
  return out;
}

/* Shared by a watcher and its stop function; freed by whichever of the two goes last. */
typedef struct box {
  struct watcher *w;
  bool fnGone;
} box;

typedef struct watcher {
  uv_poll_t poll;
  napi_env env;
  napi_ref onPacket;
  napi_ref onError;
  napi_async_context context;
  box *box;
  int fd;
  bool stopped;
  bool envGone;
  unsigned char buf[PACKET_MAX];
} watcher;

static void env_cleanup(void *arg);

static void on_closed(uv_handle_t *h) {
  watcher *w = h->data;
  if (!w->envGone) {
    napi_remove_env_cleanup_hook(w->env, env_cleanup, w);
    if (w->onPacket) napi_delete_reference(w->env, w->onPacket);
    if (w->onError) napi_delete_reference(w->env, w->onError);
    if (w->context) napi_async_destroy(w->env, w->context);
  }
  if (w->box) {
    if (w->box->fnGone) free(w->box);
    else w->box->w = NULL;
  }
  free(w);
}

static void stop(watcher *w) {
  if (w->stopped) return;
  w->stopped = true;
  uv_poll_stop(&w->poll);
  uv_close((uv_handle_t *)&w->poll, on_closed);
}

/* The environment goes first (a worker ending): close the handle without touching N-API again. */
static void env_cleanup(void *arg) {
  watcher *w = arg;
  w->envGone = true;
  stop(w);
}

/* Calls `fn` with `arg` inside the open callback scope; an exception thrown goes to 'uncaughtException'. */
static bool call(watcher *w, napi_ref fn, napi_value arg) {
  napi_env env = w->env;
  napi_value f, recv;
  if (napi_get_reference_value(env, fn, &f) != napi_ok || napi_get_undefined(env, &recv) != napi_ok) return false;
  napi_status s = napi_call_function(env, recv, f, 1, &arg, NULL);
  if (s == napi_pending_exception) {
    napi_value ex;
    if (napi_get_and_clear_last_exception(env, &ex) == napi_ok) napi_fatal_exception(env, ex);
    return false;
  }
  return s == napi_ok;
}

static void on_readable(uv_poll_t *h, int status, int events) {
  (void)events;
  watcher *w = h->data;
  if (w->stopped) return;
  napi_env env = w->env;
  napi_handle_scope outer;
  if (napi_open_handle_scope(env, &outer) != napi_ok) return;
  napi_value resource;
  napi_callback_scope scope;
  if (napi_create_object(env, &resource) != napi_ok ||
      napi_open_callback_scope(env, resource, w->context, &scope) != napi_ok) {
    napi_close_handle_scope(env, outer);
    return;
  }
  int err = status < 0 ? -status : 0;
  for (int i = 0; !err && i < WATCH_BUDGET && !w->stopped; i++) {
    ssize_t r = read(w->fd, w->buf, sizeof w->buf);
    if (r < 0) {
      if (errno == EINTR) continue;
      if (errno != EAGAIN && errno != EWOULDBLOCK) err = errno;
      break;
    }
    napi_handle_scope hs;
    if (napi_open_handle_scope(env, &hs) != napi_ok) break;
    napi_value packet;
    bool ok = napi_create_buffer_copy(env, (size_t)r, w->buf, NULL, &packet) == napi_ok && call(w, w->onPacket, packet);
    napi_close_handle_scope(env, hs);
    if (!ok) break;
  }
  if (err && !w->stopped) {
    napi_value e = errno_error(env, "watchTun", "read", err);
    napi_ref onError = w->onError;
    w->onError = NULL; /* on_closed runs later; this call still holds the function */
    stop(w);
    if (e) {
      napi_value f, recv, arg = e;
      if (napi_get_reference_value(env, onError, &f) == napi_ok && napi_get_undefined(env, &recv) == napi_ok &&
          napi_call_function(env, recv, f, 1, &arg, NULL) == napi_pending_exception) {
        napi_value ex;
        if (napi_get_and_clear_last_exception(env, &ex) == napi_ok) napi_fatal_exception(env, ex);
      }
    }
    napi_delete_reference(env, onError);
  }
  napi_close_callback_scope(env, scope);
  napi_close_handle_scope(env, outer);
}

static napi_value stop_watch(napi_env env, napi_callback_info info) {
  void *data = NULL;
  CHECK(napi_get_cb_info(env, info, NULL, NULL, NULL, &data));
  box *b = data;
  if (b->w) stop(b->w);
  napi_value u;
  CHECK(napi_get_undefined(env, &u));
  return u;
}

static void stop_fn_gone(napi_env env, void *data, void *hint) {
  (void)env;
  (void)hint;
  box *b = data;
  if (b->w) b->fnGone = true; /* the watch goes on; on_closed frees the box */
  else free(b);
}

napi_value watch_tun(napi_env env, napi_callback_info info) {
  size_t argc = 3;
  napi_value argv[3];
  CHECK(napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
  napi_valuetype t;
  double d = -1;
  /* An integer 0..2^31-1, never truncated or coerced (1.5, 2^32 + 3, NaN would name another descriptor). */
  if (argc < 1 || napi_typeof(env, argv[0], &t) != napi_ok || t != napi_number ||
      napi_get_value_double(env, argv[0], &d) != napi_ok || !(d >= 0 && d <= INT_MAX) || d != (double)(int)d) {
    napi_throw_type_error(env, NULL, "watchTun(fd, onPacket, onError): fd must be a descriptor number");
    return NULL;
  }
  const int fd = (int)d;
  for (size_t i = 1; i < 3; i++)
    if (argc <= i || napi_typeof(env, argv[i], &t) != napi_ok || t != napi_function) {
      napi_throw_type_error(env, NULL, "watchTun(fd, onPacket, onError): onPacket and onError must be functions");
      return NULL;
    }
  uv_loop_t *loop = NULL;
  CHECK(napi_get_uv_event_loop(env, &loop));
  watcher *w = calloc(1, sizeof *w);
  box *b = calloc(1, sizeof *b);
  if (!w || !b) {
    free(w);
    free(b);
    return throw_errno(env, "watchTun", "allocating", ENOMEM);
  }
  w->env = env;
  w->fd = fd;
  int r = uv_poll_init(loop, &w->poll, fd);
  if (r < 0) {
    free(w);
    free(b);
    return throw_errno(env, "watchTun", "polling the descriptor", -r);
  }
  w->poll.data = w;
  w->box = b;
  b->w = w;
  napi_value name, fn;
  if (napi_create_string_utf8(env, "rddp.TunWatch", NAPI_AUTO_LENGTH, &name) != napi_ok ||
      napi_async_init(env, NULL, name, &w->context) != napi_ok ||
      napi_create_reference(env, argv[1], 1, &w->onPacket) != napi_ok ||
      napi_create_reference(env, argv[2], 1, &w->onError) != napi_ok ||
      napi_add_env_cleanup_hook(env, env_cleanup, w) != napi_ok ||
      napi_create_function(env, "stop", NAPI_AUTO_LENGTH, stop_watch, b, &fn) != napi_ok) {
    b->fnGone = true;
    stop(w);
    return NULL;
  }
  if (napi_add_finalizer(env, fn, b, stop_fn_gone, NULL, NULL) != napi_ok) {
    b->fnGone = true;
    stop(w);
    return NULL;
  }
  r = uv_poll_start(&w->poll, UV_READABLE, on_readable);
  if (r < 0) {
    stop(w);
    return throw_errno(env, "watchTun", "polling the descriptor", -r);
  }
  return fn;
}
