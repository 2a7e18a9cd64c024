'use strict';
// Throws when the optional native build is absent (or on Windows); callers load it inside try/catch.
const binding = require('./build/Release/writev.node');
module.exports = { writeRanges: binding.writeRanges, congestionControl: binding.congestionControl, RANGE_FIELDS: 5 };
