/** Numbers per range in `writeRanges`' `ranges`: buffer index, byte offset, length, Markers, wire length. */
export declare const RANGE_FIELDS: 5;
/**
 * Sends ranges `first` .. `first + count - 1` to the socket descriptor `fd` in order, gathered (sendmsg,
 * non-blocking). Each range is `RANGE_FIELDS` numbers in `ranges`: index into `buffers`, byte offset
 * (from the start of the ArrayBuffer, or of the Uint8Array's view), length, Markers, wire length.
 * Markers -1: the range goes as it is (wire length = length). Otherwise `room * 65536 + ptr`: a 4-octet MPA
 * Marker (16 zero bits, then FPDUPTR; RFC 5044 §4.2, §4.3) goes in whenever `room` (0..508) octets of the
 * range have passed, then every 508, its FPDUPTR `ptr` plus the range's wire octets before it (the first
 * `ptr + room`, each next one 512 further); wire length = length
 * + 4 per Marker. The first range is sent from `skip` wire octets in. Returns the octets the socket took
 * (0 when it would block now), or `-errno` on a socket error with nothing sent. Throws a TypeError or
 * RangeError, sending nothing, when an argument is malformed or a range lies outside its buffer.
 *
 * Every argument is read once and never coerced: `fd`, `first`, `count`, `skip` and each range's numbers
 * must be integers in range (no NaN, fraction or valueOf); the ranges are copied before they are checked
 * and only the copy is sent; each buffer a range names is read from `buffers` once (a getter runs then, and
 * a buffer it detaches or shrinks is seen as it is afterwards). Views of a SharedArrayBuffer are sent as
 * they are at the moment of the send; a bare SharedArrayBuffer is refused (TypeError).
 */
export declare function writeRanges(
  fd: number,
  buffers: readonly (ArrayBufferLike | Uint8Array)[],
  ranges: Float64Array,
  first: number,
  count: number,
  skip: number,
): number;
/**
 * The TCP congestion control in effect on socket `fd` (`'cubic'`, `'bbr'`, ...), after setting it to `name`
 * when one is given (Linux `TCP_CONGESTION`). Returns `-errno` instead when the kernel refuses: `-ENOENT` for
 * an algorithm it has not loaded, `-EPERM` for one outside `net.ipv4.tcp_allowed_congestion_control` without
 * CAP_NET_ADMIN, `-ENOPROTOOPT` where the option does not exist. Throws a TypeError when an argument is malformed.
 */
export declare function congestionControl(fd: number, name?: string): string | number;
/**
 * Attaches to the existing TUN device `name` (1..15 octets) and returns its descriptor: `/dev/net/tun` opened
 * O_RDWR | O_CLOEXEC, blocking, with TUNSETIFF IFF_TUN | IFF_NO_PI, so each read or write is one whole IP
 * packet with no header. The device is made beforehand, persistent (`ip tuntap add dev NAME mode tun`); a
 * name its namespace does not know is an error (`ENODEV`), never a new device. With `netnsPath` (for
 * instance `/run/netns/NAME`) the calling thread enters that network namespace for the open and the
 * TUNSETIFF and always returns to its own afterwards, so the descriptor reaches the device there while the
 * process stays where it was. Needs CAP_NET_ADMIN (and CAP_SYS_ADMIN for `netnsPath`). Linux only.
 *
 * Throws a TypeError or RangeError when an argument is malformed, and otherwise an Error whose message
 * names the failed step and whose `code` is the errno name: `ENODEV` (no such device), `ENOENT` (no such
 * `netnsPath`), `EINVAL` (`netnsPath` is not a network namespace), `EPERM`, `EBUSY`, `ENOSYS` (not Linux).
 */
export declare function openTun(name: string, netnsPath?: string): number;
/**
 * Reads the packets of TUN descriptor `fd` (from `openTun`) on the JavaScript thread as they arrive,
 * through a libuv poll handle, with no thread-pool read left blocked on the descriptor. The descriptor
 * becomes non-blocking. `onPacket` gets each packet, a Buffer of its own (at most 64 per wake before timers
 * and I/O get their turn); a read error other than EAGAIN ends the watch and goes to `onError`, with `code`
 * the errno name. Returns a function that ends the watch: nothing is read after it, and the descriptor
 * may be closed then (not before). One watch per descriptor. Linux only.
 */
export declare function watchTun(
  fd: number,
  onPacket: (packet: Buffer) => void,
  onError: (error: NodeJS.ErrnoException) => void,
): () => void;
