'use strict'
// [rddp] The receive side, rewritten (was: one array slot per TSN, scanned per
// chunk, Buffer.concat per message, the smallest TSN dropped at a full window).
//
// - TSNs (RFC 4960 §6.2): the Cumulative TSN Ack Point and the TSNs received above
//   it as sorted ranges, so a SACK's Gap Ack Blocks are read off directly.
// - Streams (RFC 4960 §6.5, §6.9; RFC 8260 §2.1): per inbound stream, the messages
//   being reassembled, keyed by SSN (DATA) or MID (I-DATA); a message is delivered
//   once whole and next in its stream's order. Streams never wait on one another.
// - One copy at most: a message of one fragment is delivered as a view of the
//   packet it came in; fragments are joined once.
// - The window (§6.2): octets held (received, not delivered) are taken from a_rwnd.
//   At a closed window a chunk above every TSN held is dropped; one below makes
//   room by dropping the highest TSN held (acknowledged by no SACK yet).

const MAX_DUPLICATES = 50 // per SACK
const MAX_RANGES = 1024 // Gap Ack Blocks kept (more: the chunk that would add one is dropped)
const MAX_TSN_OFFSET = 0xFFFF // a Gap Ack Block offset is 16 bits (RFC 4960 §3.3.4)

class InStream {
  constructor () {
    this.next = 0 // next SSN or MID to deliver
    this.pending = new Map() // SSN / MID → message being reassembled
    this.unordered = null // unordered DATA fragments by TSN (rare: RFC 5043 sends none)
  }
}

class Message {
  constructor () {
    this.ppid = 0
    this.first = -1 // TSN (DATA) or FSN 0 (I-DATA) of the B fragment, when seen
    this.last = -1 // TSN or FSN of the E fragment, when seen
    this.frags = new Map() // TSN or FSN → user data
    this.bytes = 0
  }
}

function serialDiff (a, b) {
  return (a - b) | 0
}

class Reassembly {
  constructor (options) {
    options = options || {}
    this.rwnd = options.rwnd
    this.onDeliver = options.onDeliver || (() => {})
    this.duplicates = []
    this.held = 0 // octets received and not yet delivered
    this.have_gaps = false
    this.cumTsn = 0
    this.ranges = [] // [start, end] offsets from cumTsn (1 = cumTsn + 1), sorted, disjoint, not adjacent
    this.heldByTsn = new Map() // TSN above cumTsn → { stream, key, message } of an undelivered fragment
    this.streams = []
    this.paused = new Set()
    this.interleaved = false // I-DATA negotiated (RFC 8260 §2.2)
  }

  init (options) {
    this.cumTsn = (options.initial_tsn - 1) >>> 0
  }

  // Compatibility with the package's field (RFC 1982 serial object).
  get peer_c_tsn () {
    return { number: this.cumTsn }
  }

  get maxTsnOffset () {
    return this.ranges.length ? this.ranges[this.ranges.length - 1][1] : 0
  }

  // One DATA or I-DATA chunk. Returns true when it was accepted (new), false when
  // it was a duplicate or dropped.
  process (chunk) {
    if (this.paused.has(chunk.stream_id)) return false
    const offset = serialDiff(chunk.tsn, this.cumTsn)
    if (offset <= 0 || this._has(offset)) {
      if (this.duplicates.length < MAX_DUPLICATES) this.duplicates.push(chunk.tsn)
      return false
    }
    if (offset > MAX_TSN_OFFSET) return false
    const length = chunk.user_data.length
    // (a chunk that does not fit an open window is taken: the window is exceeded by one chunk at most)
    if (this.rwnd <= 0) {
      // RFC 4960 §6.2: at a closed window, a chunk above the highest TSN held is
      // dropped; otherwise the highest TSN held for reordering makes room.
      if (offset > this.maxTsnOffset || !this._dropHighestAbove(offset)) return false
    }
    if (!this._addTsn(offset)) return false
    this.held += length
    this.rwnd -= length
    this._place(chunk)
    this._advanceCum()
    this.have_gaps = this.ranges.length > 0
    return true
  }

  _has (offset) {
    const r = this.ranges
    let lo = 0
    let hi = r.length - 1
    while (lo <= hi) {
      const mid = (lo + hi) >> 1
      if (offset < r[mid][0]) hi = mid - 1
      else if (offset > r[mid][1]) lo = mid + 1
      else return true
    }
    return false
  }

  _addTsn (offset) {
    const r = this.ranges
    // the common case: in order, right after the last range (or the Cumulative TSN)
    const n = r.length
    if (n === 0) {
      r.push([offset, offset])
      return true
    }
    const lastRange = r[n - 1]
    if (offset === lastRange[1] + 1) {
      lastRange[1] = offset
      return true
    }
    let i = 0
    while (i < n && r[i][1] < offset - 1) i++
    if (i < n && r[i][0] <= offset + 1) {
      // adjacent to range i (before or after it)
      if (offset < r[i][0]) r[i][0] = offset
      else r[i][1] = offset
      if (i + 1 < n && r[i][1] + 1 === r[i + 1][0]) {
        r[i][1] = r[i + 1][1]
        r.splice(i + 1, 1)
      }
      return true
    }
    if (n >= MAX_RANGES) return false
    r.splice(i, 0, [offset, offset])
    return true
  }

  _removeTsn (offset) {
    const r = this.ranges
    for (let i = 0; i < r.length; i++) {
      const [s, e] = r[i]
      if (offset < s || offset > e) continue
      if (s === e) r.splice(i, 1)
      else if (offset === s) r[i][0] = s + 1
      else if (offset === e) r[i][1] = e - 1
      else r.splice(i, 1, [s, offset - 1], [offset + 1, e])
      return
    }
  }

  _advanceCum () {
    const r = this.ranges
    if (r.length === 0 || r[0][0] !== 1) return
    const advance = r[0][1]
    r.shift()
    for (const range of r) {
      range[0] -= advance
      range[1] -= advance
    }
    const from = this.cumTsn
    this.cumTsn = (this.cumTsn + advance) >>> 0
    if (this.heldByTsn.size > 0) {
      // fragments now at or below the Cumulative TSN can no longer be dropped
      for (let i = 1; i <= advance; i++) this.heldByTsn.delete((from + i) >>> 0)
    }
  }

  _place (chunk) {
    const sid = chunk.stream_id
    let stream = this.streams[sid]
    if (!stream) {
      stream = new InStream()
      this.streams[sid] = stream
    }
    const data = chunk.user_data
    const flags = chunk.flags
    if (flags.B && flags.E && (flags.U || (chunk.idata ? chunk.mid : chunk.ssn) === stream.next)) {
      // whole, and next (or unordered): delivered from the packet, no copy
      if (!flags.U) stream.next = chunk.idata ? (stream.next + 1) >>> 0 : (stream.next + 1) & 0xFFFF
      this._deliver([data], data.length, sid, chunk.ppid)
      if (!flags.U) this._deliverReady(sid, stream)
      return
    }
    if (flags.U && !chunk.idata) {
      this._placeUnordered(stream, chunk)
      return
    }
    const key = flags.U ? 'u' + chunk.mid : chunk.idata ? chunk.mid : chunk.ssn
    let message = stream.pending.get(key)
    if (!message) {
      message = new Message()
      stream.pending.set(key, message)
    }
    // DATA: fragments by TSN (consecutive, §6.9); I-DATA: by FSN (FSN 0 is the B fragment, RFC 8260 §2.1)
    const index = chunk.idata ? (flags.B ? 0 : chunk.fsn) : chunk.tsn
    if (message.frags.has(index)) return
    message.frags.set(index, data)
    message.bytes += data.length
    if (flags.B) {
      message.first = index
      message.ppid = chunk.ppid
    }
    if (flags.E) message.last = index
    this.heldByTsn.set(chunk.tsn, { stream: sid, key, index })
    if (!this._whole(message)) return
    if (flags.U) {
      stream.pending.delete(key)
      this._deliverMessage(sid, message)
      return
    }
    if (key === stream.next) this._deliverReady(sid, stream)
  }

  _whole (message) {
    if (message.first < 0 || message.last < 0) return false
    return message.frags.size === ((message.last - message.first) >>> 0) + 1
  }

  _deliverReady (sid, stream) {
    for (;;) {
      const message = stream.pending.get(stream.next)
      if (!message || !this._whole(message)) return
      stream.pending.delete(stream.next)
      stream.next = this.interleaved ? (stream.next + 1) >>> 0 : (stream.next + 1) & 0xFFFF
      this._deliverMessage(sid, message)
    }
  }

  _deliverMessage (sid, message) {
    const parts = []
    const n = message.frags.size
    for (let i = 0; i < n; i++) {
      const index = (message.first + i) >>> 0
      parts.push(message.frags.get(index))
    }
    this._deliver(parts, message.bytes, sid, message.ppid)
  }

  _deliver (parts, length, sid, ppid) {
    this.held -= length
    this.rwnd += length
    const data = parts.length === 1 ? parts[0] : Buffer.concat(parts, length)
    this.onDeliver(data, sid, ppid)
  }

  // Unordered DATA (U bit) fragments: joined by consecutive TSNs from a B to an E.
  _placeUnordered (stream, chunk) {
    if (!stream.unordered) stream.unordered = new Map()
    stream.unordered.set(chunk.tsn, chunk)
    let first = chunk.tsn
    while (!stream.unordered.get(first).flags.B) {
      const prev = (first - 1) >>> 0
      if (!stream.unordered.has(prev)) return
      first = prev
    }
    let last = first
    const ppid = stream.unordered.get(first).ppid
    const parts = []
    let length = 0
    for (;;) {
      const c = stream.unordered.get(last)
      if (!c) return
      parts.push(c.user_data)
      length += c.user_data.length
      if (c.flags.E) break
      last = (last + 1) >>> 0
    }
    for (let t = first; ; t = (t + 1) >>> 0) {
      stream.unordered.delete(t)
      if (t === last) break
    }
    this._deliver(parts, length, chunk.stream_id, ppid)
  }

  // RFC 4960 §6.2: drops the highest TSN held for reordering above `offset`, so the
  // new chunk fits. Returns false when there is none.
  _dropHighestAbove (offset) {
    for (let o = this.maxTsnOffset; o > offset; o--) {
      const tsn = (this.cumTsn + o) >>> 0
      const ref = this.heldByTsn.get(tsn)
      if (!ref) continue
      const stream = this.streams[ref.stream]
      const message = stream && stream.pending.get(ref.key)
      if (!message) continue
      const data = message.frags.get(ref.index)
      message.frags.delete(ref.index)
      message.bytes -= data.length
      if (message.first === ref.index) message.first = -1
      if (message.last === ref.index) message.last = -1
      if (message.frags.size === 0) stream.pending.delete(ref.key)
      this.heldByTsn.delete(tsn)
      this.held -= data.length
      this.rwnd += data.length
      this._removeTsn(o)
      return true
    }
    return false
  }

  sackInfo () {
    const sackOptions = {
      a_rwnd: this.rwnd > 0 ? this.rwnd : 0,
      c_tsn_ack: this.cumTsn
    }
    if (this.ranges.length > 0 || this.duplicates.length > 0) {
      sackOptions.sack_info = {
        gap_blocks: this.ranges.map(([start, finish]) => ({ start, finish })),
        duplicate_tsn: this.duplicates
      }
    }
    this.duplicates = []
    return sackOptions
  }

  pause (streamId) {
    this.paused.add(streamId)
  }

  unpause (streamId) {
    this.paused.delete(streamId)
  }
}

module.exports = Reassembly
