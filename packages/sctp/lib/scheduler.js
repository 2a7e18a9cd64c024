'use strict'
// [rddp] Per-stream send queues and the stream schedulers of RFC 8260 §3.
//
// Every SEND goes to its stream's queue; the association asks the scheduler for
// the next message to take DATA from. Streams never wait on one another's queue:
// a stream with nothing queued is not in the schedule, and a message is handed to
// the association (and its SEND completes) as soon as its last fragment has a TSN
// and sits in a packet.
//
// - 'fcfs'      §3.1 First-Come, First-Served: messages in the order of SEND.
// - 'rr'        §3.2 Round-Robin: one message per stream in turn.
// - 'priority'  §3.4 Priority: the lowest priority value first, round-robin among equals.
//
// Without I-DATA a message's fragments carry consecutive TSNs (RFC 4960 §6.9), so
// the scheduler is asked again only when a message is complete. With I-DATA
// (RFC 8260 §2.1) it is asked for every fragment: a large message on one stream
// no longer holds a small one on another.

const SCHEDULERS = ['fcfs', 'rr', 'priority']

class OutStream {
  constructor (id) {
    this.id = id
    this.queue = []
    this.head = 0
    this.priority = 0
    this.bytes = 0 // octets queued and not yet handed over
    this.ssn = 0 // next SSN (DATA) — RFC 4960 §6.5
    this.mid = 0 // next MID (I-DATA) — RFC 8260 §2.1
    this.scheduled = false
  }

  get empty () {
    return this.head >= this.queue.length
  }

  peek () {
    return this.queue[this.head]
  }

  shift () {
    const m = this.queue[this.head]
    this.queue[this.head++] = undefined
    if (this.head > 64 && this.head * 2 > this.queue.length) {
      this.queue = this.queue.slice(this.head)
      this.head = 0
    }
    return m
  }
}

class StreamScheduler {
  constructor (kind) {
    this.setKind(kind || 'rr')
    this.streams = []
    this.ring = [] // streams with queued messages, in service order
    this.ringHead = 0
    this.fifo = [] // fcfs: messages in SEND order
    this.fifoHead = 0
    this.bytes = 0
    this.count = 0
  }

  setKind (kind) {
    if (!SCHEDULERS.includes(kind)) {
      throw new TypeError(`unknown stream scheduler ${kind} (RFC 8260 §3: ${SCHEDULERS.join(', ')})`)
    }
    this.kind = kind
  }

  stream (id) {
    let s = this.streams[id]
    if (!s) {
      s = new OutStream(id)
      this.streams[id] = s
    }
    return s
  }

  setPriority (id, priority) {
    this.stream(id).priority = priority
  }

  get empty () {
    return this.count === 0
  }

  push (message) {
    const s = this.stream(message.streamId)
    s.queue.push(message)
    s.bytes += message.length
    this.bytes += message.length
    this.count++
    if (this.kind === 'fcfs') {
      this.fifo.push(message)
    } else if (!s.scheduled) {
      s.scheduled = true
      this.ring.push(s)
    }
  }

  // The message to take the next DATA from (not removed: see take()).
  next () {
    if (this.count === 0) return undefined
    if (this.kind === 'fcfs') {
      while (this.fifoHead < this.fifo.length) {
        const m = this.fifo[this.fifoHead]
        if (!m.done) return m
        this.fifo[this.fifoHead++] = undefined
      }
      this._compactFifo()
      return undefined
    }
    if (this.kind === 'priority') {
      let best
      let bestIndex = -1
      const n = this.ring.length - this.ringHead
      for (let i = 0; i < n; i++) {
        const s = this.ring[this.ringHead + i]
        if (best === undefined || s.priority < best.priority) {
          best = s
          bestIndex = i
        }
      }
      if (bestIndex > 0) {
        // rotate so that equal priorities are served round-robin
        this.ring.splice(this.ringHead + bestIndex, 1)
        this.ring.splice(this.ringHead, 0, best)
      }
      return best && best.peek()
    }
    const s = this.ring[this.ringHead]
    return s && s.peek()
  }

  // Called once a fragment of `message` went out. `complete`: its last one did.
  // `interleave`: I-DATA, so another stream may come next even mid-message.
  advance (message, complete, interleave) {
    const s = this.streams[message.streamId]
    if (complete) {
      message.done = true
      s.shift()
      s.bytes -= message.length
      this.bytes -= message.length
      this.count--
      if (this.kind === 'fcfs') {
        this.fifo[this.fifoHead++] = undefined
        this._compactFifo()
        return
      }
    } else if (!interleave || this.kind === 'fcfs') {
      return
    }
    // rr / priority: this stream goes to the back of the ring
    const head = this.ring[this.ringHead]
    if (head !== s) return
    this.ring[this.ringHead++] = undefined
    if (s.empty) {
      s.scheduled = false
    } else {
      this.ring.push(s)
    }
    if (this.ringHead > 64 && this.ringHead * 2 > this.ring.length) {
      this.ring = this.ring.slice(this.ringHead)
      this.ringHead = 0
    }
  }

  // Removes every queued message (association ended); returns them in SEND order per stream.
  drain () {
    const out = []
    for (const s of this.streams) {
      if (!s) continue
      while (!s.empty) out.push(s.shift())
      s.bytes = 0
      s.scheduled = false
    }
    this.ring = []
    this.ringHead = 0
    this.fifo = []
    this.fifoHead = 0
    this.bytes = 0
    this.count = 0
    return out
  }

  _compactFifo () {
    if (this.fifoHead > 64 && this.fifoHead * 2 > this.fifo.length) {
      this.fifo = this.fifo.slice(this.fifoHead)
      this.fifoHead = 0
    }
  }
}

module.exports = { StreamScheduler, SCHEDULERS }
