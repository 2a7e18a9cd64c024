/*

 [rddp] Errors with stable codes.

 */

const RAW_SOCKET_HINT =
  "raw IP encapsulation (SCTP as IPv4 protocol 132, RFC 4960 without UDP) needs the optional 'raw-socket' " +
  'package, a native addon: install it (npm install raw-socket, with npm_config_nodedir=/usr where Node ' +
  'headers are not downloaded) and run as root; or pass udpTransport for UDP encapsulation'

/** Raw IP encapsulation was asked for and `raw-socket` could not be loaded. */
class RawSocketUnavailableError extends Error {
  constructor (message, options) {
    super(message, options)
    this.name = 'RawSocketUnavailableError'
    this.code = 'ERR_SCTP_RAW_SOCKET_UNAVAILABLE'
  }
}

module.exports = {
  RAW_SOCKET_HINT,
  RawSocketUnavailableError
}
