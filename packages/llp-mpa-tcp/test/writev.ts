/**
 * Whether the optional native send path is here: `@rddp/writev` (an optional dependency of this package)
 * installed and built, on POSIX. Asked of the package itself, as the transport asks it.
 */
import { createRequire } from 'node:module';

export const writevAvailable: boolean = (() => {
  if (process.platform === 'win32') return false;
  try {
    return typeof createRequire(import.meta.url)('@rddp/writev').writeRanges === 'function';
  } catch {
    return false;
  }
})();
