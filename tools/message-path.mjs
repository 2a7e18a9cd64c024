#!/usr/bin/env node
/**
 * How many source files one message crosses (issue 36): an RDMA Write from `postSend` to the LLP's
 * `send`, and a received Send from the LLP's delivery to its completion. Measured, not read: V8's
 * precise coverage (call counts per function) is reset right before the first step and taken at the
 * last, so every function that ran in between — and only those — is counted, with its file.
 *
 *   node tools/message-path.mjs [--max-files N] [--json]
 *
 * Runs on the built packages (`pnpm build` first) over the loopback LLP, both ends in this process.
 * Exit 1 when a path crosses more than --max-files files (default: no limit).
 */
import { Session } from 'node:inspector';
import { fileURLToPath } from 'node:url';
import { loopbackModule } from '@rddp/llp-loopback';
import { createStack } from '@rddp/stack';
import { Access } from '@rddp/verbs';
import { firstValueFrom } from 'rxjs';

const args = process.argv.slice(2);
const maxFiles = args.includes('--max-files') ? Number(args[args.indexOf('--max-files') + 1]) : Infinity;
const json = args.includes('--json');
const root = fileURLToPath(new URL('..', import.meta.url));

const session = new Session();
session.connect();
/** In-process inspector calls answer synchronously: the snapshot is taken where it is asked for. */
function post(method, params = {}) {
  let out;
  let err;
  session.post(method, params, (e, r) => {
    err = e;
    out = r;
  });
  if (err) throw err;
  if (out === undefined) throw new Error(`${method}: no synchronous answer from the inspector`);
  return out;
}
post('Profiler.enable');
post('Profiler.startPreciseCoverage', { callCount: true, detailed: false });

/** Source files (packages/*\/src, as built to dist) whose functions ran since the last take. */
function take() {
  const { result } = post('Profiler.takePreciseCoverage');
  const files = new Set();
  for (const script of result) {
    if (!script.url.startsWith('file://')) continue;
    const path = fileURLToPath(script.url);
    const m = /\/(packages\/[^/]+)\/dist\/(.+)\.js$/.exec(path);
    if (!m || !path.startsWith(root)) continue;
    // The module's top-level function counts its load, not a call on the path.
    if (script.functions.some((f) => f.functionName !== '' && f.ranges[0].count > 0))
      files.add(`${m[1]}/src/${m[2]}.ts`);
  }
  return [...files].sort();
}

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
let writePath;
onLlpSend = () => {
  writePath = take();
};
const writeDone = new Promise((resolve) => {
  onWriteWc = resolve;
});
const wr = { opcode: 'rdma-write', wrId: 'measured', signaled: true, sgList: [data.sge()], remote: exposed.remote() };
take(); // the work request is built first: only postSend and what it calls are measured
qp.postSend(wr);
await writeDone;

// A received Send (RFC 5040 §5.3): the LLP's delivery → its completion on the receive CQ.
let sendPath;
peer.postRecv({ wrId: 'measured', sgList: [inbox.sge()] });
const received = new Promise((resolve) => {
  onRecvWc = (wc) => {
    sendPath = take();
    resolve(wc);
  };
});
onLlpDeliver = () => take();
await qp.send(data.sge());
const wc = await received;
if (!writePath || !sendPath || wc.byteLen !== 1024)
  throw new Error('the measured messages did not take the expected paths');

await qp.close();
session.disconnect();

/** The LLP contract and the transports are the boundary, not the path: listed apart. */
const isLlp = (f) => /^packages\/llp(-[^/]+)?\//.test(f);
const rows = Object.fromEntries(
  Object.entries({
    'RDMA Write: postSend → LLP send': writePath,
    'received Send: LLP delivery → receive completion': sendPath,
  }).map(([what, files]) => [what, { files: files.filter((f) => !isLlp(f)), llp: files.filter(isLlp) }]),
);
if (json) console.log(JSON.stringify(rows, null, 2));
else
  for (const [what, { files, llp }] of Object.entries(rows)) {
    console.log(`${what}: ${files.length} files (and ${llp.length} of the LLP it calls)`);
    for (const f of files) console.log(`  ${f}`);
    for (const f of llp) console.log(`  (llp) ${f}`);
  }
const over = Object.entries(rows).filter(([, r]) => r.files.length > maxFiles);
if (over.length > 0) {
  console.error(
    `message-path: ${over.map(([w, r]) => `${w} crosses ${r.files.length} files`).join('; ')} (max ${maxFiles})`,
  );
  process.exit(1);
}
