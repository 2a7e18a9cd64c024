const crypto = require('crypto')
const EventEmitter = require('events').EventEmitter
const debug = require('debug')
const ip = require('./ip') // [rddp] in place of the npm ip package
const Chunk = require('./chunk')
const defs = require('./defs')
const SN = require('./serial')
const Reassembly = require('./reassembly')
const { StreamScheduler } = require('./scheduler')
const transmit = require('./transmit')
const pmtud = require('./pmtud')

class Association extends EventEmitter {
  constructor (endpoint, options) {
    super()

    this.state = 'CLOSED'
    this.endpoint = endpoint
    this.localPort = endpoint.localPort

    this.remoteAddress = options.remoteAddress || undefined
    this.remotePort = options.remotePort

    this.my_tag = options.my_tag || crypto.randomBytes(4).readUInt32BE(0)
    this.a_rwnd = options.a_rwnd || endpoint.a_rwnd || defs.NET_SCTP.RWND
    this.OS = options.OS
    this.MIS = options.MIS

    this.debugger = {}
    const label = `[${this.localPort}/${this.remoteAddress}:${this.remotePort}]`
    this.debugger.warn = debug(`sctp:assoc:### ${label}`)
    this.debugger.info = debug(`sctp:assoc:## ${label}`)
    this.debugger.debug = debug(`sctp:assoc:# ${label}`)
    this.debugger.trace = debug(`sctp:assoc: ${label}`)
    this.debugger.debug('create association')

    // TODO provide also good way to iterate
    const key = this.remoteAddress + ':' + this.remotePort
    endpoint.associations_lookup[key] = this
    endpoint.associations.push(this)

    // [rddp] reassembly.js, rewritten: delivers whole messages per stream
    this.reassembly = new Reassembly({
      rwnd: this.a_rwnd,
      onDeliver: (buffer, stream, ppid) => this._deliver(buffer, stream, ppid)
    })

    this.rto_initial = defs.NET_SCTP.rto_initial
    this.rto_min = defs.NET_SCTP.rto_min
    this.rto_max = defs.NET_SCTP.rto_max
    // [rddp] RTO.Initial/Min/Max (RFC 4960 §15) may come with ASSOCIATE, so the
    // INIT is timed with them too (see SETPROTOCOLPARAMETERS).
    this._setRtoParameters(options)

    // [rddp] The path MTU comes from the user (SETPMTU), e.g. the route's MTU.
    const PMTU = options.PMTU || defs.NET_SCTP.PMTU || 1500

    this.peer_rwnd = 0

    // TODO: for each remote address if multi-homing
    this.sack_timeout = defs.NET_SCTP.sack_timeout
    this.sack_freq = defs.NET_SCTP.sack_freq
    this.hb_interval = defs.NET_SCTP.hb_interval
    this.flightsize = 0

    //  13.3.  Per Transport Address Data
    this.default_address_data = {
      active: false,
      errors: 0,
      error_threshold: 10,
      cwnd: Math.min(4 * PMTU, Math.max(2 * PMTU, 4404)), // [rddp] RFC 9260 §7.2.1
      RTO: this.rto_initial,
      SRTT: 0,
      RTTVAR: 0,
      PMTU,
      rtoPending: false // RTO-Pending
    }
    Object.assign(this, this.default_address_data) // TODO

    this.destinations = {}
    if (this.remoteAddress) {
      this.destinations[this.remoteAddress] = this.default_address_data
    }

    // [rddp] transmit.js: per-stream send queues (RFC 8260 §3), one packetization pass
    // per event-loop turn, chunks in flight in TSN order
    this.scheduler = new StreamScheduler(options.scheduler || endpoint.scheduler || 'rr')
    // RFC 8260 I-DATA: offered when asked for, used when both sides offered it
    this.offerIData = !!(options.idata !== undefined ? options.idata : endpoint.idata)
    this.interleaving = false
    this.sendHighWater = options.sendHighWater || 4 * 1024 * 1024
    this.association_max_retrans = defs.NET_SCTP.association_max_retrans
    this._initTransmit({ max_burst: defs.NET_SCTP.max_burst })

    this.readBuffer = []
    this.everSentSack = false
    this.packetsSinceLastSack = 0
    this.nonces = {}
    this.mute = false // If received ABORT chunk

    this.on('init', this.onInit.bind(this))
    this.on('init_ack', this.onInitAck.bind(this))
    this.on('heartbeat', this.onHeartbeat.bind(this))
    this.on('heartbeat_ack', this.onHeartbeatAck.bind(this))
    this.on('cookie_echo', this.onCookieEcho.bind(this))
    this.on('cookie_ack', this.onCookieAck.bind(this))
    this.on('shutdown', this.onShutdown.bind(this))
    this.on('shutdown_ack', this.onShutdownAck.bind(this))
    this.on('shutdown_complete', this.onShutdownComplete.bind(this))
    this.on('error', this.onError.bind(this))
    this.on('abort', this.onAbort.bind(this))

    this.on('icmp', this.onICMP.bind(this))
  }

  acceptRemote (chunk) {
    if (!chunk) {
      throw new Error('peer init chunk not provided')
    }
    this.debugger.debug('accept remote association with chunk %O', chunk)
    this._updatePeer(chunk)
    /*
      TODO
     A COOKIE ACK MAY be sent to an UNCONFIRMED address,
     but it MUST be bundled with a HEARTBEAT including a nonce.
     An implementation that does NOT support bundling
     MUST NOT send a COOKIE ACK to an UNCONFIRMED address.
     2)  For the receiver of the COOKIE ECHO,
     the only CONFIRMED address is the one to which the INIT-ACK was sent.
    */
    this._up()
    this._sendChunk('cookie_ack', {})
  }

  onInit (chunk, src, header) {
    this.debugger.warn('rfc4960 "5.2.2.  Unexpected INIT ...', this.state, chunk, src, header)
    // TODO restart association
    /*
     Before responding, the endpoint MUST check to see if the
     unexpected INIT adds new addresses to the association.  If new
     addresses are added to the association, the endpoint MUST respond
     with an ABORT, copying the 'Initiate Tag' of the unexpected INIT into
     the 'Verification Tag' of the outbound packet carrying the ABORT.  In
     the ABORT response, the cause of error MAY be set to 'restart of an
     association with new addresses'.  The error SHOULD list the addresses
     that were added to the restarting association.
     */
    if (chunk.ipv4_address) {
      // TODO check if addresses are really new. now is a placeholder
      let abort = new Chunk('abort', {})
      // we MUST copy initiate_tag, so use low-level endpoint function to send packet
      this.endpoint._sendPacket(
        src,
        this.remotePort,
        chunk.initiate_tag,
        [abort.toBuffer()],
        () => {
          this.debugger.info('responded with an ABORT')
        }
      )
    }
  }

  onCookieEcho (chunk, src, header) {
    this.debugger.warn(
      'Handle a COOKIE ECHO when a TCB Exists',
      this.state,
      chunk
    )
    const cookieData = this.endpoint.validateCookie(chunk.cookie, header)
    let initChunk
    if (cookieData) {
      this.debugger.trace('cookie is valid %O', cookieData)
      initChunk = Chunk.fromBuffer(cookieData.initChunk)
    }
    this.debugger.debug('association my_tag %d peer_tag %d, cookie my_tag %d peer_tag %d',
      this.my_tag, this.peer_tag, cookieData.my_tag, initChunk.initiate_tag)
    let action = ''
    if (this.my_tag === cookieData.my_tag) {
      // B or D
      if (this.peer_tag === initChunk.initiate_tag) {
        action = 'D'
      } else {
        action = 'B'
      }
    } else if (this.peer_tag === initChunk.initiate_tag) {
      // TODO tmp, implement tie-tags
      const tieTagsUnknown = true
      if (tieTagsUnknown) {
        action = 'C'
      }
    } else {
      // TODO tmp, implement tie-tags
      const tieTagsMatch = true
      if (tieTagsMatch) {
        action = 'A'
      }
    }
    this.debugger.warn('COOKIE ECHO action', action)
    switch (action) {
      case 'A':
        /*
        TODO tie-tags
        TODO SHUTDOWN-ACK-SENT state
        A) In this case, the peer may have restarted.  When the endpoint
        recognizes this potential 'restart', the existing session is
        treated the same as if it received an ABORT followed by a new
        COOKIE ECHO with the following exceptions:

        -  Any SCTP DATA chunks MAY be retained (this is an
           implementation-specific option).

        -  A notification of RESTART SHOULD be sent to the ULP instead of
           a "COMMUNICATION LOST" notification.

        All the congestion control parameters (e.g., cwnd, ssthresh)
        related to this peer MUST be reset to their initial values (see
        Section 6.2.1).

        After this, the endpoint shall enter the ESTABLISHED state.

        If the endpoint is in the SHUTDOWN-ACK-SENT state and recognizes
        that the peer has restarted (Action A), it MUST NOT set up a new
        association but instead resend the SHUTDOWN ACK and send an ERROR
        chunk with a "Cookie Received While Shutting Down" error cause to
        its peer.
        */
        if (this.state === 'SHUTDOWN-ACK-SENT') {
          this._sendChunk('shutdown_ack', {}, src, () => {
            this.debugger.info('sent shutdown_ack')
          })
          return
        }
        // TODO
        this.debugger.warn('association restart is not implemented and was not tested!')
        this.emit('RESTART')
        break
      case 'B':
        /*
        TODO init collision
        B) In this case, both sides may be attempting to start an association
        at about the same time, but the peer endpoint started its INIT
        after responding to the local endpoint's INIT.  Thus, it may have
        picked a new Verification Tag, not being aware of the previous tag
        it had sent this endpoint.  The endpoint should stay in or enter
        the ESTABLISHED state, but it MUST update its peer's Verification
        Tag from the State Cookie, stop any init or cookie timers that may
        be running, and send a COOKIE ACK.
        */
        this.peer_tag = initChunk.initiate_tag
        // TODO stop init & cookie timers
        this._sendChunk('cookie_ack')
        break
      case 'C':
        /*
        C) In this case, the local endpoint's cookie has arrived late.
        Before it arrived, the local endpoint sent an INIT and received an
        INIT ACK and finally sent a COOKIE ECHO with the peer's same tag
        but a new tag of its own.  The cookie should be silently
        discarded.  The endpoint SHOULD NOT change states and should leave
        any timers running.
        */
        break
      case 'D':
        /*
        D) When both local and remote tags match, the endpoint should enter
        the ESTABLISHED state, if it is in the COOKIE-ECHOED state.  It
        should stop any cookie timer that may be running and send a COOKIE ACK.
        */
        if (this.state === 'COOKIE-ECHOED') {
          this.state = 'ESTABLISHED'
        }
        // TODO should be already running, state also be ESTABLISHED
        // this._enableHeartbeat()
        // TODO stop cookie timer
        this.debugger.warn('COOKIE ECHO send cookie_ack')
        this._sendChunk('cookie_ack')
        break
      default:
      /*
      Note: For any case not shown in Table 2,
       the cookie should be silently discarded
      */
    }
  }

  onICMP (packet, code) {
    /*
     An implementation MAY ignore any ICMPv4 messages where the code
     does not indicate "Protocol Unreachable" or "Fragmentation Needed".
    */
    this.debugger.warn('< received ICMP code %d', code)
    if (packet.v_tag && packet.v_tag !== this.peer_tag) {
      return
    }
    if (code === 4) {
      if (packet.v_tag === 0 && packet.chunks.length === 1) {
        const chunk = packet.chunks[0]
        if (chunk.chunkType === 'init' && chunk.initiate_tag === this.my_tag) {
          this.debugger.warn('< ICMP fragmentation needed')
          // TODO process this information as defined for PATH MTU discovery
        }
      }
    } else {
      this.debugger.warn('< ICMP signals that peer unreachable')
      this.emit('COMMUNICATION LOST')
      this._destroy()
    }
  }

  onInitAck (chunk, source) {
    if (this.state === 'COOKIE-WAIT') {
      this.debugger.debug('< init_ack cookie', chunk.state_cookie)
      clearTimeout(this.T1)
      if (chunk.inbound_streams === 0) {
        // Receiver of an INIT ACK with the MIS value set to 0
        // SHOULD destroy the association discarding its TCB
        this._abort({ error_causes: [{ cause: 'INVALID_MANDATORY_PARAMETER' }] }, source)
        return
      }
      this._updatePeer(chunk)
      this._sendChunk('cookie_echo', { cookie: chunk.state_cookie }, source, () => {
        this.debugger.debug('sent cookie_echo', chunk.state_cookie)
      })
      // [rddp] RFC 4960 §5.1 C: start T1-cookie; on expiry the COOKIE ECHO is sent
      // again, with the timer doubled, up to Max.Init.Retransmits times. The
      // package had no T1-cookie: a lost COOKIE ECHO or COOKIE ACK left the
      // association in COOKIE-ECHOED for ever.
      let retransmissions = 0
      let timeout = this.RTO
      const expireT1Cookie = () => {
        if (this.state !== 'COOKIE-ECHOED' || retransmissions >= defs.NET_SCTP.max_init_retransmits) {
          return
        }
        retransmissions++
        this._sendChunk('cookie_echo', { cookie: chunk.state_cookie }, source)
        timeout = Math.min(timeout * 2, this.rto_max)
        this.T1 = setTimeout(expireT1Cookie, timeout)
      }
      this.T1 = setTimeout(expireT1Cookie, timeout)
      /*
       If the receiver of an INIT ACK chunk detects unrecognized parameters
       and has to report them according to Section 3.2.1, it SHOULD bundle
       the ERROR chunk containing the 'Unrecognized Parameters' error cause
       with the COOKIE ECHO chunk sent in response to the INIT ACK chunk.
       If the receiver of the INIT ACK cannot bundle the COOKIE ECHO chunk
       with the ERROR chunk, the ERROR chunk MAY be sent separately but not
       before the COOKIE ACK has been received.

       Note: Any time a COOKIE ECHO is sent in a packet, it MUST be the
       first chunk.
       */
      if (chunk.errors) {
        this.ERROR([{
          cause: 'UNRECONGNIZED_PARAMETERS',
          unrecognized_parameters: Buffer.concat(chunk.errors)
        }], source)
      }
      this.state = 'COOKIE-ECHOED'
    } else {
      /*
       5.2.3.  Unexpected INIT ACK

       If an INIT ACK is received by an endpoint in any state other than the
       COOKIE-WAIT state, the endpoint should discard the INIT ACK chunk.
       An unexpected INIT ACK usually indicates the processing of an old or
       duplicated INIT chunk.
       */
      this.debugger.warn('Unexpected INIT ACK')
    }
  }

  ERROR (errors, dst) {
    this._sendChunk('error', {
      error_causes: errors
    }, dst)
  }

  onHeartbeat (chunk, source) {
    /*
      A receiver of a HEARTBEAT MUST respond to a
      HEARTBEAT with a HEARTBEAT-ACK after entering the COOKIE-ECHOED state
      (INIT sender) or the ESTABLISHED state (INIT receiver), up until
      reaching the SHUTDOWN-SENT state (SHUTDOWN sender) or the SHUTDOWN-
      ACK-SENT state (SHUTDOWN receiver). TODO
     */
    this.debugger.trace(
      '< HEARTBEAT',
      chunk.heartbeat_info.length,
      chunk.heartbeat_info
    )
    this._sendChunk(
      'heartbeat_ack',
      { heartbeat_info: chunk.heartbeat_info },
      source
    )
  }

  onHeartbeatAck (chunk) {
    this.debugger.trace(
      '< HEARTBEAT ACK',
      chunk.heartbeat_info.length,
      chunk.heartbeat_info
    )
    /*
     Upon receipt of the HEARTBEAT ACK, a verification is made that the
     nonce included in the HEARTBEAT parameter is the one sent to the
     address indicated inside the HEARTBEAT parameter.  When this match
     occurs, the address that the original HEARTBEAT was sent to is now
     considered CONFIRMED and available for normal data transfer.
    */
    // [rddp] RFC 8899 §6.2: the answer to a PLPMTUD probe (pmtud.js)
    if (this._probeAcked(chunk.heartbeat_info)) return
    const nonce = chunk.heartbeat_info.readUInt32BE(0)
    if (this.nonces[nonce]) {
      const address = ip.toString(chunk.heartbeat_info, 8, 4)
      this.debugger.trace('address confirmed alive', address)
    }
    delete this.nonces[nonce]
  }

  onCookieAck () {
    this.debugger.debug('< COOKIE ACK in state %s', this.state)
    if (this.state === 'COOKIE-ECHOED') {
      clearTimeout(this.T1) // [rddp] RFC 4960 §5.1 E: stop T1-cookie
      this._up()
    }
  }

  onShutdown (chunk, source) {
    // TODO: 9.2.  Shutdown of an Association
    if (this.state === 'SHUTDOWN-RECEIVED') {
      /*
       Once an endpoint has reached the SHUTDOWN-RECEIVED state, it MUST NOT
       send a SHUTDOWN in response to a ULP request, and should discard
       subsequent SHUTDOWN chunks.
       */
      // [rddp] RFC 4960 §9.2: discarded as a SHUTDOWN, not as an acknowledgement:
      // the SHUTDOWN sender answers our DATA with SHUTDOWN alone, so its
      // Cumulative TSN Ack is what acknowledges it (as Linux does in this state).
      this._ackFromShutdown(chunk)
      return
    }

    this.debugger.info('< SHUTDOWN')

    // TODO check c_tsn_ack
    /*
     cause: 'PROTOCOL_VIOLATION',
     additional_information:
     'The cumulative tsn ack beyond the max tsn currently sent:...'

     verify, by checking the Cumulative TSN Ack field of the chunk,
     that all its outstanding DATA chunks have been received by the
     SHUTDOWN sender.
     If there are still outstanding DATA chunks left, the SHUTDOWN
     receiver MUST continue to follow normal data transmission procedures
     defined in Section 6, until all outstanding DATA chunks are
     acknowledged; however, the SHUTDOWN receiver MUST NOT accept new data
     from its SCTP user.
     */

    if (this.state === 'SHUTDOWN-SENT') {
      /*
       If an endpoint is in the SHUTDOWN-SENT state and receives a SHUTDOWN
       chunk from its peer, the endpoint shall respond immediately with a
       SHUTDOWN ACK to its peer, and move into the SHUTDOWN-ACK-SENT state
       restarting its T2-shutdown timer.
       */
      this._sendChunk('shutdown_ack', {}, source, () => {
        this.debugger.info('sent shutdown_ack')
      })
      this._restartT2()
      return
    }

    this.state = 'SHUTDOWN-RECEIVED'
    // [rddp] RFC 4960 §9.2: the SHUTDOWN ACK goes once all outstanding DATA is
    // acknowledged, here or from onSack() (the package only checked flightsize,
    // here, and never sent it later). The SHUTDOWN's Cumulative TSN Ack is
    // checked first: it acknowledges DATA as a SACK's does (the package ignored
    // it: DATA whose SACK was lost went again on each T3-rtx until a SACK got
    // through, or T2-shutdown gave up and the association was lost).
    if (this.idle) {
      this._sendShutdownAck(source)
    } else {
      this._ackFromShutdown(chunk)
    }
  }

  // [rddp] RFC 4960 §9.2: the Cumulative TSN Ack of a SHUTDOWN, processed as a
  // SACK without Gap Ack Blocks (§6.2.1 D: one below the Cumulative TSN Ack Point
  // is ignored); onSack() sends the SHUTDOWN ACK once nothing is outstanding.
  _ackFromShutdown (chunk) {
    if (this.outstandingCount === 0 || typeof chunk.c_tsn_ack !== 'number') return
    if (this.cumAck !== undefined && ((chunk.c_tsn_ack - this.cumAck) | 0) <= 0) return
    this.onSack({ c_tsn_ack: chunk.c_tsn_ack, a_rwnd: this.peer_rwnd, sack_info: {} })
  }

  _sendShutdownAck (source) {
    this._sendChunk('shutdown_ack', {}, source, () => {
      this.state = 'SHUTDOWN-ACK-SENT'
      this.debugger.info('sent shutdown_ack')
    })
    this._startT2()
  }

  onShutdownAck (chunk, source) {
    /*
     Upon the receipt of the SHUTDOWN ACK, the SHUTDOWN sender shall stop
     the T2-shutdown timer, send a SHUTDOWN COMPLETE chunk to its peer,
     and remove all record of the association.
     */
    this.debugger.info('< SHUTDOWN ACK in state %s', this.state)
    if (this.state === 'SHUTDOWN-SENT' || this.state === 'SHUTDOWN-ACK-SENT') {
      this._down()
      this.state = 'CLOSED'
      this.debugger.info('> sending SHUTDOWN COMPLETE')
      this._sendChunk('shutdown_complete', {}, source, () => {
        this.debugger.trace('sent SHUTDOWN COMPLETE')
        this.emit('SHUTDOWN COMPLETE')
        this._destroy()
      })
    }
  }

  onShutdownComplete () {
    /*
    -   The receiver of a SHUTDOWN COMPLETE shall accept the packet if
       the Verification Tag field of the packet matches its own tag and
       the T bit is not set OR if it is set to its peer's tag and the T
       bit is set in the Chunk Flags.  Otherwise, the receiver MUST
       silently discard the packet and take no further action.  An
       endpoint MUST ignore the SHUTDOWN COMPLETE if it is not in the
       SHUTDOWN-ACK-SENT state.

     Upon reception of the SHUTDOWN COMPLETE chunk, the endpoint will
     verify that it is in the SHUTDOWN-ACK-SENT state; if it is not, the
     chunk should be discarded.  If the endpoint is in the SHUTDOWN-ACK-
     SENT state, the endpoint should stop the T2-shutdown timer and remove
     all knowledge of the association (and thus the association enters the
     CLOSED state).
     */
    if (this.state === 'SHUTDOWN-ACK-SENT') {
      this._down()
      this.debugger.info('< SHUTDOWN COMPLETE')
      this.emit('SHUTDOWN COMPLETE')
      this._destroy()
    }
  }

  onError (chunk) {
    this.debugger.warn('< ERROR', chunk)
    if (
      chunk.error_causes.some(
        item => item.cause === 'STALE_COOKIE_ERROR'
      )
    ) {
      // TODO: 5.2.6.  Handle Stale COOKIE Error
    }
    this.emit('COMMUNICATION ERROR', chunk.error_causes)
  }

  onAbort (chunk) {
    this.debugger.info('< ABORT, connection closed')
    if (chunk.error_causes) {
      this.debugger.warn('< ABORT has error causes', chunk.error_causes)
    }
    this._down()
    this.emit('COMMUNICATION LOST', 'abort', chunk.error_causes)
    this._destroy()
  }

  init () {
    const initParams = {
      initiate_tag: this.my_tag,
      a_rwnd: this.a_rwnd,
      outbound_streams: this.OS,
      inbound_streams: this.MIS,
      initial_tsn: this.my_next_tsn.number
    }
    if (this.offerIData) {
      initParams.supported_extensions = Buffer.from([transmit.I_DATA]) // [rddp] RFC 8260 §2.2
    }

    if (this.endpoint.localAddress) {
      initParams.ipv4_address = this.endpoint.localAddress
    }
    this.debugger.info('INIT params', initParams)

    let counter = 0
    this.RTI = this.rto_initial
    const init = () => {
      if (counter >= defs.NET_SCTP.max_init_retransmits) {
        // Fail
      } else {
        if (counter) {
          // Not from RFC, but from lk-sctp
          this.RTI *= 2
          if (this.RTI > this.rto_max) {
            this.RTI = this.rto_max
          }
        }
        this._sendChunk('init', initParams)
        counter++
        // [rddp] RFC 4960 §6.3.3 E2 / §5.1: the doubled value (the package computed
        // it and then waited RTO again).
        this.T1 = setTimeout(init, this.RTI)
      }
    }
    init()
    this.state = 'COOKIE-WAIT'
  }

  _sendChunk (chunkType, options, destination, callback) {
    const chunk = new Chunk(chunkType, options)
    this.debugger.debug('> send chunk', chunkType)
    this.debugger.trace('> %O', chunk)
    /*
     By default, an endpoint SHOULD always transmit to the primary path,
     unless the SCTP user explicitly specifies the destination transport
     address (and possibly source transport address) to use.

     An endpoint SHOULD transmit reply chunks (e.g., SACK, HEARTBEAT ACK,
     etc.) to the same destination transport address from which it
     received the DATA or control chunk to which it is replying.  This
     rule should also be followed if the endpoint is bundling DATA chunks
     together with the reply chunk.

     However, when acknowledging multiple DATA chunks received in packets
     from different source addresses in a single SACK, the SACK chunk may
     be transmitted to one of the destination transport addresses from
     which the DATA or control chunks being acknowledged were received.
    */
    // [rddp] SACKs and HEARTBEAT ACKs are bundled by the next flush (transmit.js);
    // DATA never comes here (SEND).
    if (chunkType === 'sack') {
      this._sack()
    } else if (chunkType === 'heartbeat_ack') {
      this._queueControl(chunk.toBuffer())
    } else {
      // No bundle
      // setTimeout(() => {
      // use nextTick to be in order with bundled chunks
      const buffer = chunk.toBuffer()
      this.debugger.trace('> no-bundle send', chunkType)
      this._sendPacket([buffer], destination, [callback])
      // }, 0)
    }
  }

  _updateRTO (R) {
    // [rddp] RFC 4960 §6.3.1 C2/C3 with §15 RTO.Alpha = 1/8 and RTO.Beta = 1/4
    // (defs holds them as powers of two; the package divided by 3 and 2), G1
    // (RTTVAR <- G only when it computes to 0; the package kept it >= G = 50 ms,
    // so RTO never fell below SRTT + 200 ms), and a first measurement of 0 ms
    // (under the clock's granularity) counted as one.
    if (this.rttMeasured) {
      const alpha = 1 / (1 << defs.NET_SCTP.rto_alpha_exp_divisor)
      const beta = 1 / (1 << defs.NET_SCTP.rto_beta_exp_divisor)
      this.RTTVAR = (1 - beta) * this.RTTVAR + beta * Math.abs(this.SRTT - R)
      this.SRTT = (1 - alpha) * this.SRTT + alpha * R
    } else {
      this.rttMeasured = true
      this.SRTT = R
      this.RTTVAR = R / 2
    }
    if (this.RTTVAR === 0) {
      this.RTTVAR = defs.NET_SCTP.G
    }
    this.RTO = this.SRTT + 4 * this.RTTVAR
    if (this.RTO < this.rto_min) {
      this.RTO = this.rto_min
    }
    if (this.RTO > this.rto_max) {
      this.RTO = this.rto_max
    }
    this.debugger.trace('new RTO %d', this.RTO)
  }

  _startT2 () {
    if (this.T2) {
      this.debugger.trace('T2-shutdown timer is already running')
      return
    }
    this.debugger.trace('start T3-shutdown timer (RTO %d)', this.RTO)
    this.T2 = setTimeout(this._expireT2.bind(this), this.RTO)
  }

  _stopT2 () {
    if (this.T2) {
      this.debugger.trace('stop T2-shutdown timer')
      clearTimeout(this.T2)
      this.T2 = null
    }
  }

  _restartT2 () {
    this.debugger.trace('restart T2-shutdown timer')
    this._stopT2()
    this._startT2()
  }

  _expireT2 () {
    // [rddp] RFC 4960 §9.2: on expiry the SHUTDOWN (with the current Cumulative
    // TSN Ack; the package sent 0) or SHUTDOWN ACK is sent again and T2-shutdown
    // restarted, backed off by §6.3.3 E2, until Association.Max.Retrans. The
    // package sent one retransmission and never restarted the timer.
    this.T2 = null
    this.shutdownRetransmissions = (this.shutdownRetransmissions || 0) + 1
    if (this.shutdownRetransmissions > defs.NET_SCTP.association_max_retrans) {
      this.emit('COMMUNICATION LOST')
      this._destroy()
      return
    }
    this.RTO = Math.min(this.RTO * 2, this.rto_max)
    if (this.state === 'SHUTDOWN-SENT') {
      // TODO source
      this._sendChunk('shutdown', { c_tsn_ack: this.reassembly.cumTsn }, null, () => {
        this.debugger.info('resent shutdown')
      })
      this._startT2()
    } else if (this.state === 'SHUTDOWN-ACK-SENT') {
      // TODO source
      this._sendChunk('shutdown_ack', {}, null, () => {
        this.debugger.info('resent shutdown ack')
      })
      this._startT2()
    }
  }

  _startT3 () {
    if (this.T3) {
      this.debugger.trace('T3-rtx timer is already running')
      return
    }
    this.debugger.trace('start T3-rtx timer (RTO %d)', this.RTO)
    // [rddp] Node runs expired timers before reading the socket: after the event
    // loop was busy for longer than RTO, a SACK already received would lose the
    // race. The expiry is handled after pending I/O, unless a SACK stopped or
    // restarted the timer meanwhile (RFC 4960 §6.3.2 R2/R3).
    const timer = setTimeout(() => {
      setImmediate(() => {
        if (this.T3 === timer) this._expireT3()
      })
    }, this.RTO)
    this.T3 = timer
  }

  _stopT3 () {
    if (this.T3) {
      this.debugger.trace('stop T3-rtx timer')
      clearTimeout(this.T3)
      this.T3 = null
    }
  }

  _restartT3 () {
    this.debugger.trace('restart T3-rtx timer')
    this._stopT3()
    this._startT3()
  }

  _up () {
    /*
     HEARTBEAT sending MAY begin upon reaching the
     ESTABLISHED state and is discontinued after sending either SHUTDOWN
     or SHUTDOWN-ACK. TODO
    */
    this.state = 'ESTABLISHED'
    this._enableHeartbeat()
    this.debugger.info('association established')
    this.emit('COMMUNICATION UP')
    this._scheduleFlush() // [rddp] what was sent before the association came up
    this._startPmtud() // [rddp] RFC 8899: confirm the path MTU with probes
  }

  _down () {
    this._stopPmtud()
    clearInterval(this._heartbeatInterval)
    clearTimeout(this.T1)
    clearTimeout(this.T2)
    clearTimeout(this.T3)
    clearTimeout(this._sack_timer)
  }

  _enableHeartbeat () {
    this._heartbeatInterval = setInterval(() => {
      /*
       To probe an address for verification, an endpoint will send
       HEARTBEATs including a 64-bit random nonce and a path indicator (to
       identify the address that the HEARTBEAT is sent to) within the
       HEARTBEAT parameter.
       */
      for (const address in this.destinations) {
        const destination = this.destinations[address]
        const heartbeatInfo = crypto.randomBytes(12)
        const nonce = heartbeatInfo.readUInt32BE(0)
        this.nonces[nonce] = true
        ip.toBuffer(address, heartbeatInfo, 8)
        this.debugger.trace(
          '> heartbeat to %s, %d bytes',
          address,
          heartbeatInfo.length,
          heartbeatInfo,
          destination
        )
        this._sendChunk('heartbeat', { heartbeat_info: heartbeatInfo }, address)
        /*
         The endpoint should increment the respective error counter of the
         destination transport address each time a HEARTBEAT is sent to that
         address and not acknowledged within one RTO.

         When the value of this counter reaches the protocol parameter
         'Path.Max.Retrans', the endpoint should mark the corresponding
         destination address as inactive if it is not so marked, and may also
         optionally report to the upper layer the change of reachability of
         this destination address.  After this, the endpoint should continue
         HEARTBEAT on this destination address but should stop increasing the
         counter.
        */
      }
    }, this.hb_interval)
  }

  _sendPacket (buffers, destination, callbacks) {
    // TODO: order of destroying
    if (this.mute) {
      return
    }
    if (!this.endpoint) {
      return
    }
    this.endpoint._sendPacket(
      destination || this.remoteAddress,
      this.remotePort,
      this.peer_tag,
      buffers,
      () => {
        callbacks.forEach(cb => {
          // Callback for each last chunk
          if (typeof cb === 'function') {
            cb()
          }
        })
      }
    )
  }

  _shutdown (callback) {
    // this._down()
    this._sendChunk(
      'shutdown',
      { c_tsn_ack: this.reassembly.cumTsn },
      null,
      () => {
        /*
       It shall then start the T2-shutdown timer and enter the SHUTDOWN-SENT
       state.  If the timer expires, the endpoint must resend the SHUTDOWN
       with the updated last sequential TSN received from its peer.
       The rules in Section 6.3 MUST be followed to determine the proper
       timer value for T2-shutdown.
       */
        // [rddp] RFC 4960 §9.2: start T2-shutdown (the package never did: a lost
        // SHUTDOWN was not sent again).
        this.state = 'SHUTDOWN-SENT'
        this._startT2()
        this.debugger.info('> sent SHUTDOWN')
        if (typeof callback === 'function') {
          callback()
        }
      }
    )
    /*
     The sender of the SHUTDOWN MAY also start an overall guard timer
     'T5-shutdown-guard' to bound the overall time for the shutdown
     sequence.  At the expiration of this timer, the sender SHOULD abort
     the association by sending an ABORT chunk.  If the 'T5-shutdown-
     guard' timer is used, it SHOULD be set to the recommended value of 5
     times 'RTO.Max'.
     */
    this.T5 = setTimeout(() => {
      this._abort()
    }, this.rto_max * 5)
  }

  _destroy () {
    this.debugger.trace('destroy association')
    this._down()
    this.state = 'CLOSED'
    clearTimeout(this.T1)
    clearTimeout(this.T3)
    clearTimeout(this.T5)
    this._failQueued(new Error('the association ended')) // [rddp] SENDs not handed over
    // TODO: better destroy assoc first, then endpoint
    // TODO delete association properly (dtls) when no addresses, only port
    if (this.endpoint) {
      for (const address in this.destinations) {
        const key = address + ':' + this.remotePort
        this.debugger.trace('destroy remote address %s', key)
        delete this.endpoint.associations_lookup[key]
      }
      // [rddp] one entry (the package removed index + 1 of them)
      const index = this.endpoint.associations.indexOf(this)
      if (index >= 0) this.endpoint.associations.splice(index, 1)

      delete this.endpoint
      // [rddp] every ending (SHUTDOWN COMPLETE, COMMUNICATION LOST, a local
      // ABORT, a SHUTDOWN before ESTABLISHED) passes here once: 'destroyed'
      // tells the owner the endpoint holds one association fewer
      this.emit('destroyed')
    }
  }

  SHUTDOWN (callback) {
    /*
     Format: SHUTDOWN(association id)
     -> result
     */

    this.debugger.trace('API SHUTDOWN in state %s', this.state)
    if (this.state !== 'ESTABLISHED') {
      this.debugger.trace('just destroy association')
      this._destroy()
      return
    }
    this.state = 'SHUTDOWN-PENDING'
    // [rddp] RFC 4960 §9.2: SHUTDOWN waits until everything queued is sent and
    // acknowledged (the package sent it at once); onSack() sends it then.
    if (!this.idle) {
      this._shutdownCallback = callback
      this._scheduleFlush()
      return
    }
    /*
     Upon receipt of the SHUTDOWN primitive from its upper layer, the
     endpoint enters the SHUTDOWN-PENDING state and remains there until
     all outstanding data has been acknowledged by its peer.  The endpoint
     accepts no new data from its upper layer, but retransmits data to the
     far end if necessary to fill gaps.

     Once all its outstanding data has been acknowledged, the endpoint
     shall send a SHUTDOWN chunk to its peer including in the Cumulative
     TSN Ack field the last sequential TSN it has received from the peer.
     */
    this._shutdown(callback)
  }

  ABORT (reason) {
    /*
     Format: ABORT(association id [, Upper Layer Abort Reason]) ->
     result
     */

    this.debugger.trace('API ABORT')
    this._down()
    // If the association is aborted on request of the upper layer,
    // a User-Initiated Abort error cause (see Section 3.3.10.12)
    // SHOULD be present in the ABORT chunk.
    const errorCause = { cause: 'USER_INITIATED_ABORT' }
    if (reason) {
      errorCause.abort_reason = reason
    }
    this._abort({ error_causes: [errorCause] })
  }

  _abort (options, destination) {
    /*
    An abort of an association is abortive by definition in
    that any data pending on either end of the association is discarded
    and not delivered to the peer.  A shutdown of an association is
    considered a graceful close where all data in queue by either
    endpoint is delivered to the respective peers.

    9.1.  Abort of an Association

    When an endpoint decides to abort an existing association, it MUST
    send an ABORT chunk to its peer endpoint.  The sender MUST fill in
    the peer's Verification Tag in the outbound packet and MUST NOT
    bundle any DATA chunk with the ABORT.  If the association is aborted
    on request of the upper layer, a User-Initiated Abort error cause
    (see Section 3.3.10.12) SHOULD be present in the ABORT chunk.

    An endpoint MUST NOT respond to any received packet that contains an
    ABORT chunk (also see Section 8.4).

    An endpoint receiving an ABORT MUST apply the special Verification
    Tag check rules described in Section 8.5.1.

    After checking the Verification Tag, the receiving endpoint MUST
    remove the association from its record and SHOULD report the
    termination to its upper layer.  If a User-Initiated Abort error
    cause is present in the ABORT chunk, the Upper Layer Abort Reason
    SHOULD be made available to the upper layer.

    */
    this._sendChunk('abort', options, destination, () => {
      this.debugger.info('sent abort')
    })
    this._destroy()
  }

  SETPRIMARY () {
    /*
     Format: SETPRIMARY(association id, destination transport address,
     [source transport address] )
     -> result
     */
  }

  // [rddp] A whole user message, in order on its stream: kept for RECEIVE and
  // announced (the package also rescheduled a SACK per message; RFC 4960 §6.2
  // asks for at most one per packet).
  _deliver (data, stream, ppid) {
    data.ppid = ppid
    this.readBuffer.push(data)
    this.emit('DATA ARRIVE', stream)
  }

  RECEIVE () {
    /*
     Format: RECEIVE(association id, buffer address, buffer size
     [,stream id])
     -> byte count [,transport address] [,stream id] [,stream sequence
     number] [,partial flag] [,delivery number] [,payload protocol-id]
     */
    this.debugger.trace('API RECEIVE', this.readBuffer[0])
    return this.readBuffer.shift()
  }

  STATUS () {
    /*
     Format: STATUS(association id)
     -> status data

     association connection state,
     destination transport address list,
     destination transport address reachability states,
     current receiver window size,
     current congestion window sizes,
     number of unacknowledged DATA chunks,
     number of DATA chunks pending receipt,
     primary path,
     most recent SRTT on primary path,
     RTO on primary path,
     SRTT and RTO on other destination addresses, etc.
     */
  }

  CHANGEHEARTBEAT () {
    /*
     Format: CHANGE HEARTBEAT(association id,
     destination transport address, new state [,interval])
     -> result
     */
  }

  REQUESTHEARTBEAT () {
    /*
     Format: REQUESTHEARTBEAT(association id, destination transport
     address)
     -> result
     */
  }

  SETFAILURETHRESHOLD () {
    /*
     Format: SETFAILURETHRESHOLD(association id, destination transport
     address, failure threshold)

     -> result
     */
  }

  SETPROTOCOLPARAMETERS (params) {
    /*
     Format: SETPROTOCOLPARAMETERS(association id,
     [,destination transport address,]
     protocol parameter list)
     -> result
     */
    // [rddp] RFC 4960 §10.1 M, for the RTO parameters of §15 (in ms):
    // { rto_initial, rto_min, rto_max }.
    this._setRtoParameters(params)
    if (!this.rttMeasured) {
      this.RTO = this.rto_initial
    }
    this.RTO = Math.min(Math.max(this.RTO, this.rto_min), this.rto_max)
  }

  _setRtoParameters (params) {
    params = params || {}
    for (const name of ['rto_initial', 'rto_min', 'rto_max']) {
      if (Number.isFinite(params[name]) && params[name] > 0) {
        this[name] = params[name]
      }
    }
  }

  RECEIVE_UNSENT () {
    /*
     Format: RECEIVE_UNSENT(data retrieval id, buffer address, buffer
     size [,stream id] [, stream sequence number] [,partial
     flag] [,payload protocol-id])

     */
  }

  RECEIVE_UNACKED () {
    /*
     Format: RECEIVE_UNACKED(data retrieval id, buffer address, buffer
     size, [,stream id] [, stream sequence number] [,partial
     flag] [,payload protocol-id])

     */
  }

  _updatePeer (chunk) {
    this.OS = Math.min(this.OS, chunk.inbound_streams)
    this.peer_tag = chunk.initiate_tag
    this.peer_rwnd = chunk.a_rwnd
    this.ssthresh = chunk.a_rwnd
    // [rddp] RFC 8260 §2.2: I-DATA is used when both INIT and INIT ACK list it in
    // their Supported Extensions (this side offered it only if offerIData)
    const extensions = chunk.supported_extensions
    this.interleaving = !!(this.offerIData && extensions && extensions.includes(transmit.I_DATA))
    this.reassembly.interleaved = this.interleaving

    this.debugger.debug('update peer OS %s, peer_tag %s, peer_rwnd %s',
      this.OS, this.peer_tag, this.peer_rwnd)

    this.reassembly.init({
      streams: this.MIS,
      initial_tsn: chunk.initial_tsn
    })

    if (chunk.ipv4_address) {
      chunk.ipv4_address.forEach(address => {
        this.debugger.debug('peer ipv4_address %s', address)
        if (!(address in this.destinations)) {
          this.destinations[address] = this.default_address_data
          const key = address + ':' + this.remotePort
          this.endpoint.associations_lookup[key] = this
        }
      })
    }
  }

  pause (stream) {
    this.reassembly.pause(stream)
  }

  unpause (stream) {
    this.reassembly.unpause(stream)
  }
}

transmit.install(Association)
pmtud.install(Association)

module.exports = Association
