'use strict'
// [rddp] Packetization Layer Path MTU Discovery (RFC 8899, §6.2 for SCTP), installed on
// Association.prototype.
//
// The path MTU the user sets (_setPmtu: e.g. the route's) is the largest size searched,
// MAX_PLPMTU; the association starts at BASE_PLPMTU and confirms a size with a probe packet: a
// HEARTBEAT padded with a PAD chunk (RFC 4820) to that size, which the peer answers with a
// HEARTBEAT ACK. Probes are not congestion-controlled DATA: a lost one loses nothing. Each round
// probes MAX_PLPMTU and the common link sizes below it at once, so a clean path is confirmed in one
// round trip and a smaller one (a tunnel) as soon as its largest common size is answered; a size
// unanswered after MAX_PROBES rounds has failed, and the range between the largest size confirmed
// and the smallest failed is then halved. Black hole detection (§4.3): two T3-rtx expiries in a
// row above BASE_PLPMTU fall back to it and search again.

const Chunk = require('./chunk')
const { initialCwnd } = require('./transmit')

const BASE_PLPMTU = 1200 // RFC 8899 §5.1.2
const MAX_PROBES = 3 // §5.1.2
const PROBE_TIMER_MS = 1000 // §5.1.1: not below 1 s
const SEARCH_DONE_WITHIN = 64 // octets: the search stops when the range is this narrow
// SCTP packet sizes of common paths (UDP/IPv4 and IPv6 over Ethernet, PPPoE, tunnels, jumbo frames)
const COMMON_SIZES = [8972, 8952, 4052, 1472, 1452, 1444, 1424, 1400, 1372, 1280]
const PROBE_MAGIC = 0x504c504d // 'PLPM': the HEARTBEAT info of a probe (RFC 4960 §3.3.5: opaque to the peer)

const pmtud = {
  _initPmtud (maxPmtu) {
    this._stopPmtud()
    const base = Math.min(BASE_PLPMTU, maxPmtu)
    this.plpmtud = {
      state: maxPmtu > base ? 'search' : 'complete',
      max: maxPmtu, // MAX_PLPMTU
      confirmed: base,
      failed: maxPmtu + 1, // smallest size known not to pass
      pending: new Map(), // size → rounds it went unanswered
      round: 0,
      timer: null,
      probesSent: 0,
      probesAcked: 0,
      blackHoles: 0
    }
    this.PMTU = base
  },

  // Starts the search (the association is up).
  _startPmtud () {
    const d = this.plpmtud
    if (!d || d.state !== 'search') return
    this._pmtudCandidates()
    this._probeRound()
  },

  // The sizes to probe between the largest confirmed and the smallest failed one.
  _pmtudCandidates () {
    const d = this.plpmtud
    const top = d.max & ~3 // packets are whole words (RFC 4960 §3.2)
    for (const size of [top, ...COMMON_SIZES]) {
      if (size > d.confirmed && size < d.failed && size <= top && !d.pending.has(size)) d.pending.set(size, 0)
    }
  },

  _probeRound () {
    const d = this.plpmtud
    if (this.state === 'CLOSED' || !this.endpoint) return
    d.round = (d.round + 1) >>> 0
    for (const size of d.pending.keys()) this._probe(size, d.round)
    clearTimeout(d.timer)
    d.timer = setTimeout(() => this._probeRoundOver(), PROBE_TIMER_MS)
    if (d.timer.unref) d.timer.unref()
  },

  _probe (size, round) {
    const d = this.plpmtud
    d.probesSent++
    const info = Buffer.alloc(12)
    info.writeUInt32BE(PROBE_MAGIC, 0)
    info.writeUInt32BE(round, 4)
    info.writeUInt32BE(size, 8)
    const heartbeat = new Chunk('heartbeat', { heartbeat_info: info }).toBuffer()
    // the packet: common header 12, the HEARTBEAT, a PAD chunk (4-octet header) filling the rest
    const padding = Math.max(0, size - 12 - heartbeat.length - 4)
    const pad = new Chunk('pad', { padding_data: Buffer.alloc(padding) }).toBuffer()
    this._sendPacket([heartbeat, pad], null, [])
  },

  _probeRoundOver () {
    const d = this.plpmtud
    d.timer = null
    if (d.state !== 'search') return
    for (const [size, misses] of d.pending) {
      if (misses + 1 >= MAX_PROBES) {
        d.pending.delete(size)
        if (size < d.failed) d.failed = size
      } else {
        d.pending.set(size, misses + 1)
      }
    }
    for (const size of d.pending.keys()) if (size >= d.failed) d.pending.delete(size)
    this._pmtudNext()
  },

  // A HEARTBEAT ACK; true when it answered a probe.
  _probeAcked (info) {
    if (!info || info.length < 12 || info.readUInt32BE(0) !== PROBE_MAGIC) return false
    const d = this.plpmtud
    if (!d || d.state !== 'search') return true
    const probed = info.readUInt32BE(8)
    d.probesAcked++
    // the largest whole-word size below MAX_PLPMTU stands for it
    const size = probed === (d.max & ~3) ? d.max : probed
    if (size > d.confirmed) {
      // RFC 9260 §7.2.1: a cwnd still at its initial value is the initial value for the new size
      if (this.cwnd === initialCwnd(this.PMTU)) this.cwnd = initialCwnd(size)
      d.confirmed = size
      this.PMTU = size
      this._scheduleFlush() // bigger packets for what waits
    }
    for (const s of d.pending.keys()) if (s <= probed) d.pending.delete(s)
    if (d.pending.size === 0) this._pmtudNext()
    return true
  },

  // After a round or an answer that left nothing pending: bisect what is left, or stop.
  _pmtudNext () {
    const d = this.plpmtud
    if (d.pending.size > 0) {
      this._probeRound()
      return
    }
    const next = (d.confirmed + Math.floor((d.failed - d.confirmed) / 2)) & ~3
    if (d.confirmed >= d.max || d.failed - d.confirmed <= SEARCH_DONE_WITHIN || next <= d.confirmed) {
      d.state = 'complete'
      clearTimeout(d.timer)
      d.timer = null
      return
    }
    d.pending.set(next, 0)
    this._probeRound()
  },

  // T3-rtx expired (transmit.js): two in a row at a size above the base look like a black hole.
  _pmtudOnT3 () {
    const d = this.plpmtud
    if (!d || this.errorCount < 2 || this.PMTU <= BASE_PLPMTU) return
    d.blackHoles++
    d.state = 'search'
    d.failed = this.PMTU
    d.confirmed = Math.min(BASE_PLPMTU, d.max)
    d.pending.clear()
    this.PMTU = d.confirmed
    this._pmtudCandidates()
    this._pmtudNext()
  },

  _stopPmtud () {
    if (this.plpmtud && this.plpmtud.timer) clearTimeout(this.plpmtud.timer)
  }
}

function install (Association) {
  for (const key of Object.getOwnPropertyNames(pmtud)) {
    Object.defineProperty(Association.prototype, key, Object.getOwnPropertyDescriptor(pmtud, key))
  }
}

module.exports = { install, BASE_PLPMTU }
