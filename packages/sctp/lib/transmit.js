'use strict'
// [rddp] The transmit path, rewritten (RFC 4960 §6, §7; RFC 9260; RFC 8260; RFC 7053).
// Installed on Association.prototype; its state lives on the association (TCB).
//
// SEND puts a message on its stream's queue (scheduler.js) and returns. Once per
// event-loop turn (setImmediate), _flush() builds packets up to the path MTU:
// a pending SACK first, then control chunks, then chunks marked for retransmission
// (§6.1 C), then new DATA or I-DATA as rules A and B of §6.1 allow. Each packet is
// encoded once into one buffer of its exact size (the user data copied once, from
// the caller's buffer), its CRC32c computed once, and handed to the transport. A
// message's SEND completes when its last fragment is in a packet handed over; the
// encoded chunk is kept for retransmission until the Cumulative TSN Ack covers it.
//
// Chunks in flight are kept in TSN order (TSNs are assigned consecutively and leave
// from the front), so a SACK finds a TSN by subtraction — no sort, no scan of all.

const Packet = require('./packet')

const DATA = 0x00
const SACK = 0x03
const I_DATA = 0x40
const DATA_HEADER = 16 // RFC 4960 §3.3.1
const I_DATA_HEADER = 20 // RFC 8260 §2.1
const COMMON_HEADER = 12
// Below this many octets of room a packet is sent rather than carry a small first fragment.
const MIN_FRAGMENT = 512

function serialDiff (a, b) {
  return (a - b) | 0
}

// RFC 9260 §7.2.1
function initialCwnd (pmtu) {
  return Math.min(4 * pmtu, Math.max(2 * pmtu, 4404))
}

function pad4 (n) {
  return (n + 3) & ~3
}

function now () {
  return performance.now()
}

// One DATA or I-DATA chunk sent and not yet covered by the Cumulative TSN Ack.
class SentChunk {
  constructor (tsn, bytes, size) {
    this.tsn = tsn
    this.bytes = bytes // the encoded chunk, padding included (kept for retransmission)
    this.size = size // its Chunk Length: what flightsize counts (RFC 4960 §6.1)
    this.sentAt = 0
    this.transmissions = 1
    this.acked = false // by a Gap Ack Block (may be reneged, §6.3.2 R4)
    this.inFlight = true
    this.retransmit = false
    this.misses = 0
    this.fastRetransmitted = false
  }
}

const transmit = {
  _initTransmit (options) {
    // a packet the socket refused counts as lost (retransmission repairs it)
    this._onSendError = error => {
      if (error) this.stats.sendErrors++
    }
    this.outstanding = [] // SentChunk, TSN order, from outHead
    this.outHead = 0
    this.partial = null // DATA: the message whose fragments are going out (consecutive TSNs)
    this.controlQueue = [] // encoded control chunks to bundle
    this.sackPending = false
    this.flushScheduled = false
    this.opportunities = 0 // SENDs and SACKs since the last flush (Max.Burst, RFC 9260 §6.1 D)
    this.rtxMarked = 0 // chunks marked for retransmission
    this.rtxForce = false // one packet of them goes regardless of cwnd (§6.3.3 E3, §7.2.4 3)
    this.gapAcked = 0 // outstanding chunks acknowledged by a Gap Ack Block
    this.nextTsn = this.my_tag >>> 0 // the package's initial TSN is its tag
    this.cumAck = undefined
    this.fastRecovery = false
    this.fastRecoveryExitPoint = 0
    this.partial_bytes_acked = 0
    this.max_burst = options.max_burst
    this.t3Probe = null
    this.stats = {
      packetsSent: 0,
      packetsReceived: 0,
      dataChunksSent: 0,
      dataChunksReceived: 0,
      sacksSent: 0,
      sacksReceived: 0,
      retransmissions: 0,
      fastRetransmits: 0,
      t3Expiries: 0,
      // a T3-rtx retransmission the peer reported as a duplicate: the original had arrived
      spuriousT3: 0,
      zeroWindowProbes: 0,
      immediateSacksRequested: 0,
      sendErrors: 0
    }
  },

  get my_next_tsn () {
    return { number: this.nextTsn }
  },

  get c_tsn_ack () {
    return this.cumAck === undefined ? undefined : { number: this.cumAck }
  },

  // Chunks sent and not yet covered by the Cumulative TSN Ack.
  get outstandingCount () {
    return this.outstanding.length - this.outHead
  },

  // Octets of user messages queued and not yet handed over (all streams).
  get bufferedAmount () {
    return this.scheduler.bytes
  },

  // Whether nothing is queued, being sent, or unacknowledged.
  get idle () {
    return this.scheduler.empty && !this.partial && this.outstandingCount === 0
  },

  // The path MTU the user knows (e.g. the route's): the initial cwnd for it (RFC 9260 §7.2.1) and the
  // largest size PLPMTUD searches (pmtud.js; until a probe confirms more, packets are BASE_PLPMTU).
  _setPmtu (pmtu) {
    this._initPmtud(pmtu)
    this.cwnd = initialCwnd(this.PMTU)
  },

  // ---- SEND (RFC 4960 §10.1 E) ---------------------------------------------------------------

  SEND (buffer, options, callback) {
    options = options || {}
    const streamId = options.stream_id || 0
    if (!(streamId >= 0 && streamId < this.OS)) {
      callback(new Error(`wrong stream id ${streamId}`))
      return false
    }
    if (this.state !== 'ESTABLISHED' && this.state !== 'COOKIE-ECHOED' && this.state !== 'COOKIE-WAIT') {
      // RFC 4960 §9.2: no new data from the upper layer once shutdown began
      callback(new Error(`not accepting new data in state ${this.state}`))
      return false
    }
    if (!buffer || buffer.length === 0) {
      callback(new Error('a user message has at least one octet (RFC 4960 §3.3.1)'))
      return false
    }
    this.scheduler.push({
      streamId,
      data: buffer,
      length: buffer.length,
      offset: 0,
      ppid: options.ppid >>> 0,
      unordered: !!options.unordered,
      ssn: 0,
      mid: 0,
      fsn: 0,
      numbered: false,
      callback,
      done: false
    })
    this.opportunities++
    this._scheduleFlush()
    return this.scheduler.bytes < this.sendHighWater
  },

  // The stream scheduler (RFC 8260 §3) and a stream's priority (for 'priority').
  SETSCHEDULER (kind) {
    this.scheduler.setKind(kind)
  },

  SETPRIORITY (streamId, priority) {
    this.scheduler.setPriority(streamId, priority)
  },

  // Fails every message not yet handed over (the association ended).
  _failQueued (error) {
    const failed = this.scheduler.drain()
    if (this.partial && !failed.includes(this.partial)) failed.unshift(this.partial)
    this.partial = null
    for (const m of failed) {
      if (m.callback) m.callback(error)
    }
  },

  _scheduleFlush () {
    if (this.flushScheduled) return
    this.flushScheduled = true
    setImmediate(() => this._flush())
  },

  _queueControl (buffer) {
    this.controlQueue.push(buffer)
    this._scheduleFlush()
  },

  // ---- packetization ---------------------------------------------------------------------------

  _flush () {
    this.flushScheduled = false
    if (this.state === 'CLOSED' || !this.endpoint || this.mute) return
    const canSendData =
      this.state === 'ESTABLISHED' || this.state === 'SHUTDOWN-PENDING' || this.state === 'SHUTDOWN-RECEIVED'
    // RFC 9260 §6.1 D: Max.Burst packets per transmission opportunity, as a temporary bound on cwnd.
    // This pass stands for every opportunity of this event-loop turn (each SEND, each SACK), as a
    // stack that flushes on each of them would have had.
    const opportunities = Math.max(1, this.opportunities)
    this.opportunities = 0
    const cwndLimit = Math.min(this.cwnd, this.flightsize + opportunities * this.max_burst * this.PMTU)
    const packets = []
    const completed = []
    let dataSent = false
    let windowLimited = false
    let earliestRetransmitted = false
    const earliest = this.outstandingCount > 0 ? this.outstanding[this.outHead].tsn : -1
    // §6.2: DATA going out carries the SACK a delayed-SACK timer is waiting to send
    if (this._sack_timer && canSendData && (this.partial || !this.scheduler.empty || this.rtxMarked > 0)) {
      this.sackPending = true
    }

    for (;;) {
      const items = [] // Buffers (control, retransmissions) or fragment descriptors
      let size = COMMON_HEADER
      let lastData = -1 // offset of the last DATA chunk in the packet (for the I bit)
      if (this.sackPending) {
        const sack = this._encodeSack()
        items.push(sack)
        size += sack.length
      }
      while (this.controlQueue.length > 0) {
        const c = this.controlQueue[0]
        if (items.length > 0 && size + c.length > this.PMTU) break
        items.push(this.controlQueue.shift())
        size += c.length
      }
      let full = false
      if (canSendData && this.rtxMarked > 0) {
        // RFC 4960 §6.1 C: chunks marked for retransmission first, lowest TSN first, as cwnd allows
        for (let i = this.outHead; i < this.outstanding.length && this.rtxMarked > 0; i++) {
          const rec = this.outstanding[i]
          if (!rec.retransmit) continue
          if (!this.rtxForce && this.flightsize >= this.cwnd) {
            windowLimited = true
            break
          }
          if (items.length > 0 && size + rec.bytes.length > this.PMTU) {
            full = true
            break
          }
          rec.retransmit = false
          this.rtxMarked--
          rec.transmissions++
          rec.misses = 0
          rec.sentAt = now()
          if (!rec.inFlight) {
            rec.inFlight = true
            this.flightsize += rec.size
          }
          // §6.3.1 C5 (Karn): no RTT measurement from a retransmitted chunk
          if (this.rtoPending && this.rtoPending.tsn === rec.tsn) this.rtoPending = false
          if (rec.tsn === earliest) earliestRetransmitted = true
          items.push(rec)
          size += rec.bytes.length
          this.stats.retransmissions++
          dataSent = true
        }
        if (items.length > 0) this.rtxForce = false
      }
      if (canSendData && this.rtxMarked === 0 && !full) {
        const header = this.interleaving ? I_DATA_HEADER : DATA_HEADER
        for (;;) {
          const message = this.partial || this.scheduler.next()
          if (!message) break
          // §6.1 B: no new data while cwnd or more is outstanding
          if (this.flightsize >= cwndLimit) {
            windowLimited = true
            break
          }
          // §6.1 A: inside the peer's window; with nothing in flight one chunk may probe a closed one
          const rwndAvailable = this.peer_rwnd - this.flightsize
          const probe = rwndAvailable <= 0 && this.flightsize === 0 && this.outstandingCount === 0
          if (rwndAvailable <= 0 && !probe) {
            windowLimited = true
            break
          }
          // the chunk's padding counts too (RFC 4960 §3.2): room in whole words
          const room = ((this.PMTU - size) & ~3) - header
          const remaining = message.length - message.offset
          if (room <= 0 || (remaining > room && room < MIN_FRAGMENT && items.length > 0)) {
            full = true
            break
          }
          let length = remaining < room ? remaining : room
          if (probe) {
            this.stats.zeroWindowProbes++
            length = Math.min(length, ((this.PMTU - COMMON_HEADER) & ~3) - header)
          }
          const fragment = this._fragment(message, length, header)
          items.push(fragment)
          size += fragment.size
          lastData = items.length - 1
          dataSent = true
          if (fragment.end) completed.push(message)
          if (probe) {
            full = true
            break
          }
        }
      }
      if (items.length === 0) break
      packets.push(this._encodePacket(items, size, lastData))
      if (!full) break
    }

    if (packets.length === 0) return
    const more = this.partial !== null || !this.scheduler.empty || this.rtxMarked > 0
    if (windowLimited && more) {
      // RFC 7053: the sender waits for window; ask the peer to SACK the last packet at once
      // rather than after its delayed-SACK timer.
      const last = packets[packets.length - 1]
      if (last.lastData >= 0) {
        last.buffer[last.lastData + 1] |= 0x08
        this.stats.immediateSacksRequested++
      }
    }
    for (const p of packets) this._transmitPacket(p.buffer)
    if (dataSent) {
      // RFC 4960 §6.3.2 R1 (start T3-rtx if not running) and R3 (restart when the
      // earliest outstanding TSN is retransmitted)
      if (earliestRetransmitted) this._restartT3()
      else this._startT3()
    }
    for (const m of completed) {
      if (m.callback) m.callback()
    }
  },

  // Takes `length` octets of `message` as its next fragment: assigns TSN (and SSN/MID, FSN).
  _fragment (message, length, header) {
    const stream = this.scheduler.stream(message.streamId)
    if (!message.numbered) {
      message.numbered = true
      if (this.interleaving) {
        message.mid = stream.mid
        stream.mid = (stream.mid + 1) >>> 0
      } else {
        message.ssn = stream.ssn
        stream.ssn = (stream.ssn + 1) & 0xFFFF
      }
    }
    const begin = message.offset === 0
    const end = message.offset + length === message.length
    const fragment = {
      message,
      start: message.offset,
      length,
      begin,
      end,
      fsn: message.fsn,
      tsn: this.nextTsn,
      size: pad4(header + length),
      chunkLength: header + length,
      header
    }
    this.nextTsn = (this.nextTsn + 1) >>> 0
    message.offset += length
    if (this.interleaving) message.fsn++
    this.flightsize += fragment.chunkLength
    this.stats.dataChunksSent++
    if (!this.interleaving) this.partial = end ? null : message
    this.scheduler.advance(message, end, this.interleaving)
    return fragment
  },

  _encodePacket (items, size, lastData) {
    const buffer = Buffer.allocUnsafe(size)
    buffer.writeUInt16BE(this.localPort, 0)
    buffer.writeUInt16BE(this.remotePort, 2)
    buffer.writeUInt32BE(this.peer_tag >>> 0, 4)
    let off = COMMON_HEADER
    let lastDataOffset = -1
    const t = now()
    for (let i = 0; i < items.length; i++) {
      const item = items[i]
      if (Buffer.isBuffer(item)) {
        item.copy(buffer, off)
        off += item.length
        continue
      }
      if (item instanceof SentChunk) {
        item.bytes.copy(buffer, off)
        buffer[off + 1] &= ~0x08 // a retransmission asks for no immediate SACK
        if (i === lastData) lastDataOffset = off
        off += item.bytes.length
        continue
      }
      // a new fragment: RFC 4960 §3.3.1 DATA or RFC 8260 §2.1 I-DATA
      const m = item.message
      const flags = (m.unordered ? 0x04 : 0) | (item.begin ? 0x02 : 0) | (item.end ? 0x01 : 0)
      buffer[off] = this.interleaving ? I_DATA : DATA
      buffer[off + 1] = flags
      buffer.writeUInt16BE(item.chunkLength, off + 2)
      buffer.writeUInt32BE(item.tsn, off + 4)
      buffer.writeUInt16BE(m.streamId, off + 8)
      if (this.interleaving) {
        buffer.writeUInt16BE(0, off + 10)
        buffer.writeUInt32BE(m.mid, off + 12)
        buffer.writeUInt32BE(item.begin ? m.ppid : item.fsn, off + 16)
      } else {
        buffer.writeUInt16BE(m.ssn, off + 10)
        buffer.writeUInt32BE(m.ppid, off + 12)
      }
      const dataOff = off + item.header
      if (Buffer.isBuffer(m.data) && item.start === 0 && item.length === m.length) {
        m.data.copy(buffer, dataOff)
      } else if (Buffer.isBuffer(m.data) || m.data instanceof Uint8Array) {
        buffer.set(m.data.subarray(item.start, item.start + item.length), dataOff)
      } else {
        // a parts view (llp-sctp's PartsView): slice is a view, copy writes it once
        const view = m.data.slice(item.start, item.start + item.length)
        view.copy(buffer, dataOff)
      }
      for (let p = dataOff + item.length; p < off + item.size; p++) buffer[p] = 0
      const rec = new SentChunk(item.tsn, buffer.subarray(off, off + item.size), item.chunkLength)
      rec.sentAt = t
      if (!this.rtoPending) this.rtoPending = { tsn: item.tsn, sent: t }
      this.outstanding.push(rec)
      if (i === lastData) lastDataOffset = off
      off += item.size
    }
    return { buffer, lastData: lastDataOffset }
  },

  _transmitPacket (buffer) {
    buffer.writeUInt32LE(0, 8)
    buffer.writeUInt32LE(Packet.checksum(buffer), 8)
    this.stats.packetsSent++
    this.endpoint.transport.sendPacket(
      this.endpoint.localActiveAddress,
      this.remoteAddress,
      Packet.prebuilt(buffer),
      this._onSendError
    )
  },

  // RFC 4960 §3.3.4: the SACK for what was received so far.
  _encodeSack () {
    this.sackPending = false
    if (this._sack_timer) {
      clearTimeout(this._sack_timer)
      this._sack_timer = null
    }
    this.everSentSack = true
    this.packetsSinceLastSack = 0
    this.stats.sacksSent++
    const info = this.reassembly.sackInfo()
    const gaps = info.sack_info ? info.sack_info.gap_blocks : []
    const dups = info.sack_info ? info.sack_info.duplicate_tsn : []
    const length = 16 + 4 * gaps.length + 4 * dups.length
    const b = Buffer.allocUnsafe(length)
    b[0] = SACK
    b[1] = 0
    b.writeUInt16BE(length, 2)
    b.writeUInt32BE(info.c_tsn_ack >>> 0, 4)
    b.writeUInt32BE(info.a_rwnd >>> 0, 8)
    b.writeUInt16BE(gaps.length, 12)
    b.writeUInt16BE(dups.length, 14)
    let off = 16
    for (const g of gaps) {
      b.writeUInt16BE(g.start, off)
      b.writeUInt16BE(g.finish, off + 2)
      off += 4
    }
    for (const d of dups) {
      b.writeUInt32BE(d >>> 0, off)
      off += 4
    }
    return b
  },

  // A SACK now, in a packet of its own (RFC 4960 §6.2: with gaps, one per packet received).
  _sendSackNow () {
    if (this.state === 'CLOSED' || !this.endpoint) return
    const sack = this._encodeSack()
    const buffer = Buffer.allocUnsafe(COMMON_HEADER + sack.length)
    buffer.writeUInt16BE(this.localPort, 0)
    buffer.writeUInt16BE(this.remotePort, 2)
    buffer.writeUInt32BE(this.peer_tag >>> 0, 4)
    sack.copy(buffer, COMMON_HEADER)
    this._transmitPacket(buffer)
  },

  // A SACK in the next flush (bundled with whatever goes out then).
  _sack () {
    this.sackPending = true
    this._scheduleFlush()
  },

  // ---- SACK processing (RFC 4960 §6.2.1, §6.3.2, §7.2) -----------------------------------------

  onSack (chunk) {
    if (!(this.state === 'ESTABLISHED' || this.state === 'SHUTDOWN-PENDING' ||
      this.state === 'SHUTDOWN-RECEIVED' || this.state === 'COOKIE-ECHOED')) {
      return
    }
    this.stats.sacksReceived++
    this.opportunities++
    const cum = chunk.c_tsn_ack >>> 0
    // §6.2.1 D i): a Cumulative TSN Ack below the one already seen is out of date
    if (this.cumAck !== undefined && serialDiff(cum, this.cumAck) < 0) return
    // one beyond the last TSN sent acknowledges nothing we sent: ignored
    if (serialDiff(cum, (this.nextTsn - 1) >>> 0) > 0) return
    const ackAdvanced = this.cumAck === undefined || serialDiff(cum, this.cumAck) > 0
    if (ackAdvanced) this.errorCount = 0 // RFC 4960 §8.2: the peer is reachable
    this.cumAck = cum
    this.peer_rwnd = chunk.a_rwnd >>> 0
    const flightsizeBefore = this.flightsize
    let newlyAcked = 0
    const out = this.outstanding

    // Cumulative TSN Ack: the chunks it covers leave
    while (this.outHead < out.length && serialDiff(out[this.outHead].tsn, cum) <= 0) {
      const rec = out[this.outHead]
      out[this.outHead++] = undefined
      if (!rec.acked) {
        newlyAcked += rec.size
        this._measureRtt(rec)
      } else {
        this.gapAcked--
      }
      if (rec.inFlight) this.flightsize -= rec.size
      if (rec.retransmit) this.rtxMarked--
    }
    if (this.outHead > 1024 && this.outHead * 2 > out.length) {
      this.outstanding = out.slice(this.outHead)
      this.outHead = 0
    }

    // Gap Ack Blocks: offsets from the Cumulative TSN Ack; outstanding[outHead] is cum + 1
    const gapBlocks = (chunk.sack_info && chunk.sack_info.gap_blocks) || []
    let htna = 0 // §7.2.4: Highest TSN Newly Acknowledged, as an offset
    let renege = false
    const missing = []
    if (gapBlocks.length > 0 || this.gapAcked > 0) {
      const list = this.outstanding
      const head = this.outHead
      const count = list.length - head
      const highestReported = gapBlocks.length > 0 ? gapBlocks[gapBlocks.length - 1].finish : 0
      let b = 0
      for (let i = 0; i < count; i++) {
        const offset = i + 1
        while (b < gapBlocks.length && gapBlocks[b].finish < offset) b++
        const rec = list[head + i]
        const inGap = b < gapBlocks.length && offset >= gapBlocks[b].start
        if (inGap) {
          if (!rec.acked) {
            rec.acked = true
            this.gapAcked++
            if (rec.retransmit) {
              rec.retransmit = false
              this.rtxMarked--
            }
            newlyAcked += rec.size
            if (offset > htna) htna = offset
            this._measureRtt(rec)
            if (rec.inFlight) {
              rec.inFlight = false
              this.flightsize -= rec.size
            }
          }
        } else {
          if (rec.acked) {
            // §6.3.2 R4: acknowledged by a Gap Ack Block before, missing now: outstanding again
            rec.acked = false
            this.gapAcked--
            renege = true
          }
          if (offset < highestReported) missing.push(rec)
          else if (this.gapAcked === 0 && b >= gapBlocks.length) break
        }
      }
    }
    const dups = (chunk.sack_info && chunk.sack_info.duplicate_tsn) || []
    if (this.t3Probe !== null && dups.includes(this.t3Probe)) {
      this.stats.spuriousT3++
      this.t3Probe = null
    }
    const allAcked = this.outstandingCount === 0
    if (allAcked) {
      this.flightsize = 0
      this.gapAcked = 0
      this.rtxMarked = 0
    }

    // §7.2.4: Fast Recovery ends when its exit point is acknowledged
    if (this.fastRecovery && serialDiff(cum, this.fastRecoveryExitPoint) >= 0) {
      this.fastRecovery = false
    }
    // §7.2.1 / §7.2.2, before any Fast Retransmit of this SACK: cwnd grows when the
    // Cumulative TSN Ack advances and cwnd was in use
    if (ackAdvanced && !this.fastRecovery && flightsizeBefore >= this.cwnd - this.PMTU) {
      if (this.cwnd <= this.ssthresh) {
        this.cwnd += Math.min(newlyAcked, this.PMTU)
      } else {
        this.partial_bytes_acked += newlyAcked
        if (this.partial_bytes_acked >= this.cwnd) {
          this.partial_bytes_acked -= this.cwnd
          this.cwnd += this.PMTU
        }
      }
    }
    if (allAcked) this.partial_bytes_acked = 0

    // §7.2.4: miss indications below the HTNA (all missing ones when the Cumulative TSN
    // Ack advances in Fast Recovery); three mark a chunk, once
    let fastRetransmit = false
    for (const rec of missing) {
      const offset = serialDiff(rec.tsn, cum)
      if (offset < htna || (this.fastRecovery && ackAdvanced)) {
        rec.misses++
        if (rec.misses >= 3 && !rec.fastRetransmitted) {
          rec.misses = 0
          rec.fastRetransmitted = true
          this._markForRetransmission(rec)
          fastRetransmit = true
        }
      }
    }
    if (fastRetransmit) {
      this.stats.fastRetransmits++
      if (!this.fastRecovery) {
        this.ssthresh = Math.max(this.cwnd / 2, 4 * this.PMTU)
        this.cwnd = this.ssthresh
        this.partial_bytes_acked = 0
        this.fastRecovery = true
        this.fastRecoveryExitPoint = (this.nextTsn - 1) >>> 0
      }
      this.rtxForce = true // §7.2.4 3: one packet regardless of cwnd
    }

    if (allAcked) {
      this._stopT3() // §6.3.2 R2
      if (this.idle) this.emit('IDLE') // [rddp] nothing queued, in flight or unacknowledged
      if (this.state === 'SHUTDOWN-PENDING' && this.idle) {
        this._shutdown(this._shutdownCallback)
        return
      }
      if (this.state === 'SHUTDOWN-RECEIVED' && this.idle) {
        this._sendShutdownAck()
        return
      }
    } else if (ackAdvanced) {
      this._restartT3() // §6.3.2 R3
    } else if (renege) {
      this._startT3() // §6.3.2 R4
    }
    // §7.2.4 4: retransmitting the earliest outstanding TSN restarts T3-rtx (in _flush)
    this._scheduleFlush()
  },

  _markForRetransmission (rec) {
    if (!rec.retransmit) {
      rec.retransmit = true
      this.rtxMarked++
    }
    // §6.1 B: a chunk marked for retransmission is not in flight until sent again
    if (rec.inFlight) {
      rec.inFlight = false
      this.flightsize -= rec.size
    }
  },

  // §6.3.1 C5 (Karn): an RTT from a chunk sent once.
  _measureRtt (rec) {
    if (this.rtoPending && this.rtoPending.tsn === rec.tsn) {
      if (rec.transmissions === 1) this._updateRTO(now() - this.rtoPending.sent)
      this.rtoPending = false
    }
  },

  // RFC 4960 §6.3.3 T3-rtx expiry
  _expireT3 () {
    this.T3 = null
    if (this.outstandingCount === 0) return
    let marked = 0
    let first = -1
    for (let i = this.outHead; i < this.outstanding.length; i++) {
      const rec = this.outstanding[i]
      if (rec.acked) continue // E3: not those a Gap Ack Block acknowledged
      if (first < 0) first = rec.tsn
      this._markForRetransmission(rec)
      marked++
    }
    if (marked === 0) return
    this.stats.t3Expiries++
    this.t3Probe = first
    // E1: ssthresh and cwnd; E2: back off the timer
    this.ssthresh = Math.max(this.cwnd / 2, 4 * this.PMTU)
    this.cwnd = this.PMTU
    this.partial_bytes_acked = 0
    this.fastRecovery = false
    this.RTO = Math.min(this.RTO * 2, this.rto_max)
    // RFC 4960 §8.2: Association.Max.Retrans consecutive expiries without progress
    this.errorCount = (this.errorCount || 0) + 1
    if (this.errorCount > this.association_max_retrans) {
      this.emit('COMMUNICATION LOST', 'timeout')
      this._destroy()
      return
    }
    this._pmtudOnT3() // RFC 8899 §4.3: a black hole?
    // E3: one packet of the earliest now, the rest as cwnd allows (§6.1 C)
    this.rtxForce = true
    this._flush()
  },

  // ---- receive: a packet's DATA / I-DATA chunks (RFC 4960 §6.2) ---------------------------------

  onDataChunks (list, source) {
    if (!(this.state === 'ESTABLISHED' || this.state === 'SHUTDOWN-PENDING' || this.state === 'SHUTDOWN-SENT')) {
      return
    }
    this.stats.packetsReceived++
    const hadGaps = this.reassembly.have_gaps
    let accepted = false
    let dropped = false
    let immediate = false
    for (const chunk of list) {
      this.stats.dataChunksReceived++
      if (chunk.user_data.length === 0) {
        this._abort({ error_causes: [{ cause: 'NO_USER_DATA', tsn: chunk.tsn }] }, source)
        return
      }
      if (chunk.idata !== this.interleaving) {
        // RFC 8260 §2.2: DATA once I-DATA is negotiated, or I-DATA when it is not
        const text = this.interleaving ? 'DATA chunk after I-DATA was negotiated' : 'I-DATA chunk without I-DATA negotiated'
        this._abort({ error_causes: [{ cause: 'PROTOCOL_VIOLATION', additional_information: text }] }, source)
        return
      }
      if (chunk.flags.I) immediate = true // RFC 7053
      if (this.reassembly.process(chunk)) accepted = true
      else dropped = true
    }
    if (this.state === 'SHUTDOWN-SENT') {
      // §9.2: every packet with DATA is answered with SHUTDOWN (and a SACK when it alone cannot acknowledge)
      this._sendChunk('shutdown', { c_tsn_ack: this.reassembly.cumTsn })
      if (!this.reassembly.have_gaps && this.reassembly.duplicates.length === 0) return
    }
    if (accepted) this.packetsSinceLastSack++
    if (this.reassembly.have_gaps || this.reassembly.duplicates.length > 0 || (hadGaps && accepted)) {
      // §6.2 / §6.7: with gaps or duplicates each packet gets its own SACK at once, so the
      // sender counts its miss indications (§7.2.4); a chunk filling a gap is acked at once
      this._sendSackNow()
      return
    }
    if (immediate || dropped || !this.everSentSack || this.packetsSinceLastSack >= this.sack_freq) {
      // §6.2: the first DATA, every second packet, a dropped chunk, and RFC 7053's I bit: at once, not
      // at the end of this event-loop turn. The sender's cwnd grows by at most one PMTU per SACK
      // (§7.2.1): SACKs coalesced over everything read in one turn would slow its slow start, and a
      // sender whose window is full would wait while this side works through the socket.
      this._sendSackNow()
      return
    }
    // a lone packet: the delayed-SACK timer (SACK.Delay, RFC 9260 §6.2)
    if (!this._sack_timer) {
      this._sack_timer = setTimeout(() => {
        this._sack_timer = null
        this.sackPending = true
        this._flush()
      }, this.sack_timeout)
    }
  }
}

// Decodes a DATA (RFC 4960 §3.3.1) or I-DATA (RFC 8260 §2.1) chunk without the generic
// table-driven decoder. Returns null for a chunk too short to hold its header.
function decodeDataChunk (buffer) {
  const type = buffer[0]
  const idata = type === I_DATA
  const length = buffer.readUInt16BE(2)
  const header = idata ? I_DATA_HEADER : DATA_HEADER
  if (length < header || length > buffer.length) return null
  const f = buffer[1]
  const flags = { I: (f & 0x08) !== 0, U: (f & 0x04) !== 0, B: (f & 0x02) !== 0, E: (f & 0x01) !== 0 }
  const chunk = {
    chunkType: idata ? 'i_data' : 'data',
    idata,
    flags,
    tsn: buffer.readUInt32BE(4),
    stream_id: buffer.readUInt16BE(8),
    ssn: 0,
    mid: 0,
    fsn: 0,
    ppid: 0,
    user_data: buffer.subarray(header, length)
  }
  if (idata) {
    chunk.mid = buffer.readUInt32BE(12)
    const word = buffer.readUInt32BE(16)
    if (flags.B) chunk.ppid = word
    else chunk.fsn = word
  } else {
    chunk.ssn = buffer.readUInt16BE(10)
    chunk.ppid = buffer.readUInt32BE(12)
  }
  return chunk
}

// Decodes a SACK (RFC 4960 §3.3.4). Returns null when malformed.
function decodeSack (buffer) {
  const length = buffer.readUInt16BE(2)
  if (length < 16 || length > buffer.length) return null
  const nGaps = buffer.readUInt16BE(12)
  const nDups = buffer.readUInt16BE(14)
  if (16 + 4 * (nGaps + nDups) > length) return null
  const chunk = {
    chunkType: 'sack',
    flags: {},
    c_tsn_ack: buffer.readUInt32BE(4),
    a_rwnd: buffer.readUInt32BE(8)
  }
  if (nGaps + nDups > 0) {
    const gaps = []
    let off = 16
    for (let i = 0; i < nGaps; i++, off += 4) {
      const start = buffer.readUInt16BE(off)
      const finish = buffer.readUInt16BE(off + 2)
      if (start === 0 || finish < start) return null
      gaps.push({ start, finish })
    }
    const dups = []
    for (let i = 0; i < nDups; i++, off += 4) dups.push(buffer.readUInt32BE(off))
    chunk.sack_info = { gap_blocks: gaps, duplicate_tsn: dups }
  }
  return chunk
}

function install (Association) {
  for (const key of Object.getOwnPropertyNames(transmit)) {
    Object.defineProperty(Association.prototype, key, Object.getOwnPropertyDescriptor(transmit, key))
  }
}

module.exports = { install, decodeDataChunk, decodeSack, initialCwnd, DATA, SACK, I_DATA }
