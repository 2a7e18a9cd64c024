/*

 [rddp] The address conversions the package took from the npm `ip` package
 (advisory GHSA-2p57-rm9w-gvfp), on node:net: IPv4 (RFC 791) and IPv6
 (RFC 4291 §2.2 text forms in, RFC 5952 text form out) addresses as octets
 in network byte order, as SCTP carries them (RFC 4960 §3.3.2.1 IPv4 and
 IPv6 Address parameters).

 */

const net = require('net')

function isV4Format (address) {
  return typeof address === 'string' && net.isIPv4(address)
}

function isV6Format (address) {
  return typeof address === 'string' && net.isIPv6(address)
}

// The 8 16-bit groups of an IPv6 address (RFC 4291 §2.2: `::`, a trailing
// dotted quad, and a zone index, RFC 4007 §11, which is dropped).
function v6Groups (address) {
  let text = address.split('%')[0]
  const lastColon = text.lastIndexOf(':')
  const last = text.slice(lastColon + 1)
  if (net.isIPv4(last)) {
    const o = last.split('.').map(Number)
    const hi = ((o[0] << 8) | o[1]).toString(16)
    const lo = ((o[2] << 8) | o[3]).toString(16)
    text = text.slice(0, lastColon + 1) + hi + ':' + lo
  }
  const parse = (part) => (part === '' ? [] : part.split(':').map((g) => parseInt(g, 16)))
  const gap = text.indexOf('::')
  if (gap < 0) return parse(text)
  const head = parse(text.slice(0, gap))
  const rest = parse(text.slice(gap + 2))
  return [...head, ...new Array(8 - head.length - rest.length).fill(0), ...rest]
}

/**
 * The octets of `address` (4 for IPv4, 16 for IPv6), written into `buffer` at
 * `offset` when one is given (octets past its end are dropped), else into a new
 * buffer of `offset` + that many octets. Throws for anything else.
 */
function toBuffer (address, buffer, offset) {
  offset = ~~offset
  let octets
  if (isV4Format(address)) {
    octets = address.split('.').map(Number)
  } else if (isV6Format(address)) {
    octets = v6Groups(address).flatMap((g) => [g >> 8, g & 0xff])
  } else {
    throw new TypeError(`Invalid IP address: ${address}`)
  }
  const result = buffer || Buffer.alloc(offset + octets.length)
  for (let i = 0; i < octets.length && offset + i < result.length; i++) {
    result[offset + i] = octets[i]
  }
  return result
}

/**
 * The text form of the address at `buffer[offset, offset + length)`: dotted
 * decimal for 4 octets, RFC 5952 for 16 (the longest run of two or more zero
 * groups, the first of equals, as `::`; lower-case hex); '' for other lengths.
 */
function toString (buffer, offset, length) {
  offset = ~~offset
  length = length || buffer.length - offset
  if (length === 4) {
    return [0, 1, 2, 3].map((i) => buffer[offset + i]).join('.')
  }
  if (length !== 16) return ''
  const groups = []
  for (let i = 0; i < 16; i += 2) groups.push(buffer.readUInt16BE(offset + i))
  let best = -1
  let bestLength = 1
  for (let i = 0; i < 8;) {
    if (groups[i] !== 0) {
      i++
      continue
    }
    let j = i
    while (j < 8 && groups[j] === 0) j++
    if (j - i > bestLength) {
      best = i
      bestLength = j - i
    }
    i = j
  }
  const hex = (list) => list.map((g) => g.toString(16)).join(':')
  if (best < 0) return hex(groups)
  return hex(groups.slice(0, best)) + '::' + hex(groups.slice(best + bestLength))
}

module.exports = {
  isV4Format,
  isV6Format,
  toBuffer,
  toString
}
