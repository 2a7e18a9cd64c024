{
  "targets": [
    {
      "target_name": "crc32c_isal",
      "sources": ["src/crc32c_isal.c"],
      "cflags": ["-O2"],
      "libraries": ["-lisal"]
    }
  ]
}
