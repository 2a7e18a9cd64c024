const polycrc = require('polycrc').crc32c

// [rddp] The CRC32c (RFC 4960 §6.8, Appendix B) is pluggable (configure() in
// index.js): a user with a faster one (e.g. hardware CRC32c) sets it, and one that
// verifies packets itself before handing them over turns verification off, so each
// packet's checksum is computed once each way.
const config = {
  crc32c: buffer => polycrc(buffer),
  verify: true
}

class Packet {
  constructor (headers, chunks) {
    if (Buffer.isBuffer(headers)) {
      this.fromBuffer(headers)
      return
    }
    headers = headers || {}
    this.src_port = headers.src_port
    this.dst_port = headers.dst_port
    this.v_tag = headers.v_tag
    this.checksum = 0x00000000
    this.chunks = chunks
  }

  fromBuffer (buffer) {
    // TODO failsafe
    this.src_port = buffer.readUInt16BE(0)
    this.dst_port = buffer.readUInt16BE(2)
    this.v_tag = buffer.readUInt32BE(4)
    if (buffer.length === 8) {
      return
    }
    this.checksum = buffer.readUInt32LE(8)
    if (config.verify) {
      buffer.writeUInt32LE(0x00000000, 8)
      const checksum = config.crc32c(buffer) >>> 0
      buffer.writeUInt32LE(this.checksum, 8)
      if (this.checksum !== checksum) {
        this.checksum_error = true
        this.checksum_expected = checksum
        // Return
      }
    }
    let offset = 12
    this.chunks = []
    while (offset + 4 <= buffer.length) {
      const length = buffer.readUInt16BE(offset + 2)
      if (!length) {
        return
      }
      if (offset + length > buffer.length) {
        this.length_error = true
        return
      }
      const chunk = buffer.slice(offset, offset + length)
      this.chunks.push(chunk)
      offset += length
      const padding = length % 4
      if (padding) {
        offset += 4 - padding
      }
    }
  }

  static fromBuffer (buffer) {
    if (buffer.length < 8) {
      return false
    }
    return new Packet(buffer)
  }

  toBuffer () {
    if (!Array.isArray(this.chunks)) {
      this.chunks = []
    }
    const headers = Buffer.alloc(12)
    headers.writeUInt16BE(this.src_port, 0)
    headers.writeUInt16BE(this.dst_port, 2)
    headers.writeUInt32BE(this.v_tag, 4)
    headers.writeUInt32LE(0x00000000, 8)
    const buffer = Buffer.concat([headers, ...this.chunks])
    this.checksum = config.crc32c(buffer) >>> 0
    buffer.writeUInt32LE(this.checksum, 8)
    return buffer
  }

  // [rddp] The checksum of a packet whose checksum field is zero.
  static checksum (buffer) {
    return config.crc32c(buffer) >>> 0
  }

  // [rddp] A packet encoded and signed by the caller (transmit.js), for the transports.
  static prebuilt (buffer) {
    return {
      src_port: buffer.readUInt16BE(0),
      dst_port: buffer.readUInt16BE(2),
      chunks: PREBUILT_CHUNKS,
      toBuffer () {
        return buffer
      }
    }
  }

  static configure (options) {
    if (typeof options.crc32c === 'function') config.crc32c = options.crc32c
    if (typeof options.verifyChecksum === 'boolean') config.verify = options.verifyChecksum
  }
}

const PREBUILT_CHUNKS = Object.freeze([])

module.exports = Packet
