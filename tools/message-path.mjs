#!/usr/bin/env node
/**
 * How many source files one message crosses, and in what order: an RDMA Write from `postSend` to the
 * LLP's `send`, and a received Send from the LLP's delivery to its completion. Measured, not read: every
 * function of the built packages reports its entry (message-path-hooks.mjs instruments them as they
 * load), recording starts right before the first step and stops at the last, and a call counts as
 * entering a file when its caller is in another file. A file entered twice means the path went back to a
 * file it had left; calls within a file and returns are not entries.
 *
 *   node tools/message-path.mjs [--max-files N] [--json]   (RDDP_MESSAGE_PATH_DEBUG=1: each entry, caller and callee, on stderr)
 *
 * Runs on the built packages (`pnpm build` first) over the loopback LLP, both ends in this process.
 * Files are listed in the order the message enters them.
 * Exit 1 when a path crosses more than --max-files files (default: no limit).
 */
import { register } from 'node:module';
import { fileURLToPath } from 'node:url';
import { firstValueFrom } from 'rxjs';

const args = process.argv.slice(2);
const maxFiles = args.includes('--max-files') ? Number(args[args.indexOf('--max-files') + 1]) : Infinity;
const json = args.includes('--json');
const root = fileURLToPath(new URL('..', import.meta.url));

// Every function of the built packages reports its entry (message-path-hooks.mjs); a call counts as
// entering a file when its caller is in another file (or outside the packages). A file entered twice on
// one path means the path went back to a file it had left.
register('./message-path-hooks.mjs', import.meta.url, { data: { root } });
const trace = { on: false, entries: [] };
const distFile = (frame) => {
  const m = /\/(packages\/[^/]+)\/dist\/(.+)\.js:\d+:\d+\)?$/.exec(frame ?? '');
  return m && frame.includes(root) ? `${m[1]}/src/${m[2]}.ts` : undefined;
};
globalThis.__rddpEnter = (file) => {
  if (!trace.on) return;
  const limit = Error.stackTraceLimit;
  Error.stackTraceLimit = 3;
  const frames = new Error().stack.split('\n'); // Error, this function, the entered one, its caller
  Error.stackTraceLimit = limit;
  if (distFile(frames[3]) !== file) {
    trace.entries.push(file);
    if (process.env.RDDP_MESSAGE_PATH_DEBUG) console.error(`${file}: ${frames[2].trim()} <- ${frames[3]?.trim()}`);
  }
};
/** Starts recording entries; returns what was recorded before. */
function traceFrom() {
  const before = trace.entries;
  trace.entries = [];
  trace.on = true;
  return before;
}
function traceStop() {
  trace.on = false;
  return trace.entries;
}
const { loopbackModule } = await import('@rddp/llp-loopback');
const { createStack } = await import('@rddp/stack');
const { Access } = await import('@rddp/verbs');

const server = createStack(loopbackModule());
const client = createStack(loopbackModule());
const listener = await server.listen({ host: '127.0.0.1', port: 0 });
const accepted = firstValueFrom(listener.connections$);
const clientLink = await client.connect(listener.address);
const serverLink = await accepted;
await listener.close();

// The LLP boundary: the client's stream `send` (the Write leaves) and the server's receiver (the Send arrives).
let onLlpSend;
const tx = clientLink.streams[0];
const send = tx.send.bind(tx);
tx.send = (ulpdu, done) => {
  onLlpSend?.();
  onLlpSend = undefined;
  return send(ulpdu, done);
};
let onLlpDeliver;
const rx = serverLink.streams[0];
const setReceiver = rx.setReceiver.bind(rx);
rx.setReceiver = (handler) =>
  setReceiver(
    handler &&
      ((u) => {
        onLlpDeliver?.();
        onLlpDeliver = undefined;
        handler(u);
      }),
  );

const serverPd = server.device().allocPd();
const clientPd = client.device().allocPd();
const peer = server.queuePair(serverPd, serverLink);
const qp = client.queuePair(clientPd, clientLink);
const exposed = serverPd.registerMr(new Uint8Array(4096), Access.LocalWrite | Access.RemoteWrite);
const inbox = serverPd.registerMr(new Uint8Array(4096), Access.LocalWrite);
const data = clientPd.registerMr(new Uint8Array(1024).fill(7), 0);

// The CQs hold completions until someone subscribes: subscribe now, and listen to the measured ones only.
let onWriteWc;
let onRecvWc;
qp.sendCq.completions$.subscribe((wc) => wc.wrId === 'measured' && onWriteWc?.(wc));
peer.recvCq.completions$.subscribe((wc) => wc.wrId === 'measured' && onRecvWc?.(wc));

// Warm up: every lazily built piece of both paths exists before the measured messages.
for (let i = 0; i < 3; i++) {
  await qp.write(data.sge(), exposed.remote());
  const got = peer.recv(inbox.sge());
  await qp.send(data.sge());
  await got;
}

// An RDMA Write (RFC 5040 §5.1): postSend → the LLP's send.
let writeEntries;
onLlpSend = () => {
  writeEntries = traceStop();
};
const writeDone = new Promise((resolve) => {
  onWriteWc = resolve;
});
const wr = { opcode: 'rdma-write', wrId: 'measured', signaled: true, sgList: [data.sge()], remote: exposed.remote() };
traceFrom(); // the work request is built first: only postSend and what it calls are measured
qp.postSend(wr);
await writeDone;

// A received Send (RFC 5040 §5.3): the LLP's delivery → its completion on the receive CQ.
let sendEntries;
peer.postRecv({ wrId: 'measured', sgList: [inbox.sge()] });
const received = new Promise((resolve) => {
  onRecvWc = (wc) => {
    sendEntries = traceStop();
    resolve(wc);
  };
});
onLlpDeliver = () => traceFrom();
await qp.send(data.sge());
const wc = await received;
if (!writeEntries || !sendEntries || wc.byteLen !== 1024)
  throw new Error('the measured messages did not take the expected paths');

await qp.close();

/** The LLP contract and the transports are the boundary, not the path: listed apart. */
const isLlp = (f) => /^packages\/llp(-[^/]+)?\//.test(f);
const rows = Object.fromEntries(
  Object.entries({
    'RDMA Write: postSend → LLP send': writeEntries,
    'received Send: LLP delivery → receive completion': sendEntries,
  }).map(([what, entries]) => {
    const steps = entries.filter((f) => !isLlp(f));
    const reentered = [...new Set(steps.filter((f, i) => steps.indexOf(f) !== i))];
    const files = [...new Set(steps)];
    return [what, { files, llp: [...new Set(entries.filter(isLlp))], entries: steps, reentered }];
  }),
);
if (json) console.log(JSON.stringify(rows, null, 2));
else
  for (const [what, { files, llp, entries, reentered }] of Object.entries(rows)) {
    console.log(`${what}: ${files.length} files (and ${llp.length} of the LLP it calls)`);
    for (const f of files) console.log(`  ${f}`);
    for (const f of llp) console.log(`  (llp) ${f}`);
    console.log(
      `  entered in this order: ${entries.map((f) => f.replace(/^packages\/|\/src|\.ts$/g, '')).join(' → ')}`,
    );
    console.log(`  entered more than once: ${reentered.length === 0 ? 'none' : reentered.join(', ')}`);
  }
const over = Object.entries(rows).filter(([, r]) => r.files.length > maxFiles);
if (over.length > 0) {
  console.error(
    `message-path: ${over.map(([w, r]) => `${w} crosses ${r.files.length} files`).join('; ')} (max ${maxFiles})`,
  );
  process.exit(1);
}
