/**
 * `rddp dissect` against hostile inputs, played from outside as separate processes: a capture of tiny
 * records costs no memory per record (peak RSS of 20 MB and 100 MB of them compared), a file over the
 * limit is refused from its size before it is read (a sparse 1.1 GB file), /dev/zero at once as not a
 * capture, and a FIFO fed valid records forever is cut at --max-capture-bytes, each with exit 1 and one
 * line.
 */
import { execFileSync, spawn } from 'node:child_process';
import { once } from 'node:events';
import {
  closeSync,
  createWriteStream,
  existsSync,
  mkdtempSync,
  openSync,
  readFileSync,
  rmSync,
  truncateSync,
  writeFileSync,
  writeSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { RDDP, run } from './procs.js';

const dir = mkdtempSync(join(tmpdir(), 'rddp-dissect-hostile-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** A classic pcap global header (little-endian, microseconds, Ethernet). */
function pcapHeader(): Buffer {
  const h = Buffer.alloc(24);
  h.writeUInt32LE(0xa1b2c3d4, 0);
  h.writeUInt16LE(2, 4);
  h.writeUInt16LE(4, 6);
  h.writeUInt32LE(262144, 16);
  h.writeUInt32LE(1, 20);
  return h;
}

/** 1 MiB of empty packet records (16 octets each, a timestamp and no data). */
function tinyRecords(): Buffer {
  const b = Buffer.alloc(1 << 20);
  for (let o = 0; o < b.length; o += 16) {
    b.writeUInt32LE(1_700_000_000 + (o >>> 20), o);
    b.writeUInt32LE((o >>> 4) % 1_000_000, o + 4);
  }
  return b;
}

/** A pcap of `mib` MiB of tiny records (65 536 per MiB). */
function tinyCapture(name: string, mib: number): string {
  const file = join(dir, name);
  const fd = openSync(file, 'w');
  writeSync(fd, pcapHeader());
  const chunk = tinyRecords();
  for (let i = 0; i < mib; i++) writeSync(fd, chunk);
  closeSync(fd);
  return file;
}

/** Runs `rddp args…` with a preload that writes the process's peak RSS (KiB) to a file at exit. */
async function peakRss(args: string[]): Promise<{ code: number | null; out: string; err: string; maxRssKiB: number }> {
  const preload = join(dir, 'max-rss.cjs');
  const rssFile = join(dir, `rss-${Math.random().toString(36).slice(2)}`);
  writeFileSync(
    preload,
    `if (process.env.RDDP_TEST_RSS && /main\\.js$/.test(process.argv[1] ?? ''))
  process.on('exit', () => require('node:fs').writeFileSync(process.env.RDDP_TEST_RSS, String(process.resourceUsage().maxRSS)));\n`,
  );
  const child = spawn(RDDP, args, {
    stdio: ['ignore', 'pipe', 'pipe'],
    env: {
      ...process.env,
      RDDP_TEST_RSS: rssFile,
      NODE_OPTIONS: `${process.env.NODE_OPTIONS ?? ''} --require ${preload}`,
    },
  });
  let out = '';
  let err = '';
  child.stdout?.on('data', (d) => (out += d));
  child.stderr?.on('data', (d) => (err += d));
  const [code] = await once(child, 'exit');
  return { code: code as number | null, out, err, maxRssKiB: Number(readFileSync(rssFile, 'utf8')) };
}

describe('rddp dissect against hostile captures', () => {
  it('tiny records: no memory per record (peak RSS for 100 MB of them within 40 MB of that for 20 MB)', async () => {
    const small = await peakRss(['dissect', tinyCapture('tiny-20.pcap', 20)]);
    const large = await peakRss(['dissect', tinyCapture('tiny-100.pcap', 100)]);
    expect(small.code).toBe(0);
    expect(large.code).toBe(0);
    expect(small.out).toMatch(/: pcap, 1310720 packets, 0 iWARP connection\(s\)$/m);
    expect(large.out).toMatch(/: pcap, 6553600 packets, 0 iWARP connection\(s\)$/m);
    // 5.2 million more records: under 8 octets each (the whole capture held, as before, was ~230 each).
    expect(large.maxRssKiB - small.maxRssKiB).toBeLessThan(40 << 10);
    expect(large.maxRssKiB).toBeLessThan(400 << 10);
  }, 300_000);

  it('a file over the limit is refused from its size, nothing read (a sparse 1.1 GB file); exit 1, one line', async () => {
    const file = join(dir, 'huge.pcap');
    writeFileSync(file, pcapHeader());
    truncateSync(file, 1_100_000_000);
    const t0 = Date.now();
    const r = await run(['dissect', file]).done;
    expect(r.code).toBe(1);
    expect(r.err).toBe(
      `rddp: ${file}: 1100000000 octets, more than the 1073741824 read at most (--max-capture-bytes): nothing read (ERR_RDDP_CAPTURE_FORMAT)\n`,
    );
    expect(r.out).toBe('');
    // Reading 1.1 GB of empty records would take many seconds; the refusal takes none.
    expect(Date.now() - t0).toBeLessThan(60_000);
    // The same with a lower limit on a small file.
    const small = tinyCapture('small.pcap', 1);
    const s = await run(['dissect', '--max-capture-bytes', '1000', small]).done;
    expect(s.code).toBe(1);
    expect(s.err).toMatch(/^rddp: .*small\.pcap: 1048600 octets, more than the 1000 read at most .*: nothing read/);
  }, 120_000);

  it('/dev/zero: refused at once as not a capture (zeros are no magic number); exit 1, one line', async () => {
    if (!existsSync('/dev/zero')) return;
    const r = await run(['dissect', '/dev/zero']).done;
    expect(r.code).toBe(1);
    expect(r.err).toBe('rddp: neither a pcap nor a pcapng file (unknown magic number) (ERR_RDDP_CAPTURE_FORMAT)\n');
  }, 120_000);

  it('a FIFO fed valid records forever: cut at --max-capture-bytes, exit 1, one line', async () => {
    const fifo = join(dir, 'feed');
    try {
      execFileSync('mkfifo', [fifo]);
    } catch {
      return; // no mkfifo here
    }
    const limit = 4 << 20;
    const reader = run(['dissect', '--max-capture-bytes', String(limit), fifo]);
    // The writer: a pcap header, then tiny records for as long as anyone reads.
    const w = createWriteStream(fifo);
    const records = tinyRecords();
    const stopped = new Promise<void>((resolve) => {
      w.on('error', () => resolve());
      w.on('close', () => resolve());
    });
    w.write(pcapHeader());
    const pump = () => {
      while (w.writable && w.write(records));
      if (w.writable) w.once('drain', pump);
    };
    w.once('open', pump);
    const r = await reader.done;
    const written = w.bytesWritten;
    w.destroy();
    await stopped;
    expect(r.code).toBe(1);
    expect(r.err).toBe(
      `rddp: ${fifo}: more than ${limit} octets from a FIFO (--max-capture-bytes): read no further (ERR_RDDP_CAPTURE_FORMAT)\n`,
    );
    // The writer got that far (the reader read to the limit, not stopped early), and was then cut off.
    expect(written).toBeGreaterThan(limit - (1 << 20));
  }, 120_000);
});
