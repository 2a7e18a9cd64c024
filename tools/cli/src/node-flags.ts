/**
 * The V8 flags rddp's processes run with (`tools/rddp`, the installed `rddp` bin's shebang, `pnpm bench`
 * and the processes the bench starts; keep them in step).
 *
 * `--initial-old-space-size=128`: a receiver gets a fresh 64 KiB buffer from Node for every socket read,
 * and V8 starts with an old-generation limit barely above the live heap (≈14 MiB here). Under that
 * external-memory churn V8 fell into back-to-back full collections (40–50 Mark-Compacts in 1.3 s of a
 * 2 GiB transfer, each stalling reads while TCP's window closed): 64 KiB Writes between two processes ran
 * at 0.6 × raw TCP in those runs and at raw speed in the others. Starting the old generation at 128 MiB
 * (a collection threshold, not memory taken up front) removes them; the server's peak RSS was lower, not
 * higher. See docs/PERFORMANCE.md.
 */
export const NODE_FLAGS: readonly string[] = ['--initial-old-space-size=128'];
