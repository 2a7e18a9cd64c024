/**
 * The V8 flags rddp's processes run with (`tools/rddp`, the installed `rddp` bin's shebang, `pnpm bench`
 * and the processes the bench starts; keep them in step).
 *
 * `--initial-old-space-size=128`: V8 starts with an old-generation limit barely above the live heap.
 * When every socket read brought a fresh 64 KiB buffer (external memory), a receiver fell into
 * back-to-back Mark-Compacts. The MPA/TCP receive path no longer
 * takes a buffer per read (`llp-mpa-tcp/src/socket-rx.ts`), so rddp does not depend on this flag any more
 * (`node tools/cli/dist/main.js perf …` started without it runs as fast); it stays as a collection
 * threshold (not memory taken up front) for what still allocates per message: the SCTP and UDP LLPs, and
 * Node's own write path. See docs/PERFORMANCE.md.
 */
export const NODE_FLAGS: readonly string[] = ['--initial-old-space-size=128'];
