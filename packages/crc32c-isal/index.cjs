'use strict';
// Throws when the optional native build is absent; callers load it inside try/catch.
module.exports = require('./build/Release/crc32c_isal.node');
