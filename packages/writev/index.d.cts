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
