/**
 * What an independent decoder sees: a loopback capture of one DDP-over-SCTP connection (UDP
 * encapsulation), decoded by tshark as SCTP. Skipped with a message when tshark is absent, unless CI is
 * set, where its absence fails the test.
 */
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { firstValueFrom } from 'rxjs';
import { describe, expect, it } from 'vitest';
import { sctp } from '../src/index.js';
import { until } from './harness.js';

const TSHARK = '/usr/bin/tshark';
const haveTshark = existsSync(TSHARK);
const canCapture = haveTshark && process.getuid?.() === 0;

describe('tshark decodes the wire format', () => {
  it.skipIf(!process.env.CI && !canCapture)(
    'RFC 5043: DATA chunks carry PPID 16 and 17, INIT and INIT ACK the DDP adaptation code point (tshark)',
    async () => {
      if (!haveTshark) throw new Error(`${TSHARK} is required in CI (apt-get install tshark)`);
      if (!canCapture) throw new Error('capturing on lo needs root');
      const dir = mkdtempSync(join(tmpdir(), 'rddp-sctp-'));
      const file = join(dir, 'ddp-sctp.pcap');
      const t = sctp();
      const listener = await t.listen({ host: '127.0.0.1', port: 0 });
      const port = listener.address.port as number;
      let cap: ChildProcess | undefined;
      try {
        let ready = false;
        cap = spawn(TSHARK, ['-i', 'lo', '-w', file, '-f', `udp port ${port}`], {
          stdio: ['ignore', 'ignore', 'pipe'],
        });
        cap.stderr?.on('data', (d: Buffer) => {
          if (/Capture started|Capturing on/.test(d.toString())) ready = true;
        });
        await until(() => ready, 'tshark to start capturing', 20_000);
        await new Promise((r) => setTimeout(r, 1000)); // the capture filter is live a moment after the message
        const accepted = firstValueFrom(listener.connections$);
        const a = await t.connect({ host: '127.0.0.1', port }, { streams: 2, privateData: Buffer.from('hello') });
        const b = await accepted;
        let got = 0;
        b.streams[1]?.setReceiver(() => got++);
        a.streams[1]?.send([Buffer.alloc(3000, 1)]);
        await until(() => got === 1, 'delivery');
        await a.close();
        await new Promise((r) => setTimeout(r, 500)); // let the last packets reach the capture
        const exited = new Promise<void>((r) => cap?.once('exit', () => r()));
        cap.kill('SIGINT');
        await exited;
        cap = undefined;
        const out = execFileSync(
          TSHARK,
          [
            '-r',
            file,
            '-d',
            `udp.port==${port},sctp`,
            '-T',
            'fields',
            '-E',
            'separator=;',
            '-e',
            'sctp.chunk_type',
            '-e',
            'sctp.data_payload_proto_id',
            '-e',
            'sctp.data_sid',
            '-e',
            'sctp.adaptation_layer_indication',
            '-e',
            'sctp.checksum.status',
          ],
          { encoding: 'utf8' },
        );
        const rows = out
          .trim()
          .split('\n')
          .map((l) => l.split(';'));
        const types = rows.map((r) => (r[0] ?? '').split(',').map(Number));
        const ppids = new Set(rows.flatMap((r) => (r[1] ? r[1].split(',').map(Number) : [])));
        const initRow = rows[types.findIndex((t) => t[0] === 1)];
        const initAckRow = rows[types.findIndex((t) => t[0] === 2)];
        expect(initRow?.[3]).toBe('0x00000001'); // Adaptation Layer Indication, DDP code point
        expect(initAckRow?.[3]).toBe('0x00000001');
        expect(ppids).toEqual(new Set([16, 17]));
        expect(rows.some((r) => (r[2] ?? '').split(',').includes('0x0001'))).toBe(true); // DDP Stream 1 = SCTP stream 1
        expect(types.some((t) => t.includes(7))).toBe(true); // SHUTDOWN
        expect(types.some((t) => t.includes(14))).toBe(true); // SHUTDOWN COMPLETE
      } finally {
        cap?.kill('SIGKILL');
        await listener.close();
        rmSync(dir, { recursive: true, force: true });
      }
    },
    60_000,
  );
});
