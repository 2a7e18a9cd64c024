'use strict';
// Throws when the optional native build is absent (or on Windows); callers load it inside try/catch.
const binding = require('./build/Release/writev.node');
// TUN devices are Linux's: elsewhere openTun and watchTun throw an Error with code 'ENOSYS'.
const linuxOnly = (name) => () => {
  throw Object.assign(new Error(`${name}: TUN devices need Linux`), { code: 'ENOSYS' });
};
module.exports = {
  writeRanges: binding.writeRanges,
  congestionControl: binding.congestionControl,
  openTun: binding.openTun ?? linuxOnly('openTun'),
  watchTun: binding.watchTun ?? linuxOnly('watchTun'),
  RANGE_FIELDS: 5,
};
