"""Documents as both databases keep them: msgspec's JSON bytes, read back as written (a
U+0000 in a text is JSON's escape, kept like any other), which msgspec decodes straight
into their structs (`msgspec.json.Decoder(kind).decode`)."""

from __future__ import annotations

import msgspec

# a value encoded, ready for a document column
document = msgspec.json.Encoder().encode
