"""Hostile WebSocket frames, byte by byte over a plain socket after a hand-made handshake
(Sec-WebSocket-Key and its Accept computed here): each malformed frame closes with 1002, the
upstream's side is closed too, and the gateway then serves a fresh connection."""

import asyncio
import os
import struct

import harness as h

GATEWAY = h.gateway_yaml()

POLICY = """
categories:
  general:
    limits:
      ipv4_individual: { short: { rate: 1000/s, burst: 1000 } }
  websocket:
    limits:
      ipv4_individual: { short: { rate: 1000/s, burst: 1000 } }
    websocket:
      max_message_size: 100KiB
      messages: { rate: 1000/s, burst: 1000 }
      pings: { rate: 1000/s, burst: 1000 }   # the framing cases interleave hundreds of pings
"""

F = h.RawWs.frame
TEXT, BINARY, CONT, CLOSE, PING, PONG = 0x1, 0x2, 0x0, 0x8, 0x9, 0xA


class Hostile(h.GatewayCase):
    GATEWAY, POLICY = GATEWAY, POLICY

    async def open_raw(self, **kw):
        raw = await h.RawWs.open(self.gw.port, "/ws/raw",
                                 headers={"X-Forwarded-For": h.new_client_address()}, **kw)
        self.assertEqual(raw.status, 101)
        self.assertEqual(raw.headers.get("upgrade", "").lower(), "websocket")
        return raw

    async def fresh_connection_works(self):
        async with h.connect(self.gw, "/ws/fresh", xff=h.new_client_address()) as ws:
            await ws.send("fresh")
            self.assertEqual(await ws.recv(), "fresh")

    async def expect_protocol_error(self, *frames, valid_first=True):
        """Sends `frames` (after one valid message, echoed) and expects close 1002, the end of
        the connection, the upstream's side closed, and a fresh connection served."""
        m0 = self.gw.metrics()
        messages0 = self.echo.stats()["ws_messages"]
        raw = await self.open_raw()
        try:
            if valid_first:
                await raw.send(F(TEXT, b"valid first"))
                self.assertEqual(await raw.read_frame(), (TEXT, b"valid first"))
            for f in frames:
                await raw.send(f)
            self.assertEqual(await raw.close_code(), 1002)
            self.assertTrue(await raw.eof(), "the gateway did not end the connection")
        finally:
            raw.abort()
        self.assertTrue(await h.wait_until(lambda: self.echo.stats()["ws_open"] == 0),
                        "the upstream's side stayed open")
        # Nothing of the malformed frames made a message upstream.
        self.assertEqual(self.echo.stats()["ws_messages"] - messages0, 1 if valid_first else 0)
        m1 = self.gw.metrics()
        self.assertEqual(m1.value("tollgate_websocket_closes_total", code="1002", by="gateway")
                         - m0.value("tollgate_websocket_closes_total", code="1002", by="gateway"), 1)
        await self.fresh_connection_works()

    async def test_hand_made_handshake_and_valid_frames(self):
        raw = await self.open_raw()
        try:
            await raw.send(F(TEXT, b"hello"))
            self.assertEqual(await raw.read_frame(), (TEXT, b"hello"))
            await raw.send(F(BINARY, bytes(300)))  # 16-bit length
            self.assertEqual(await raw.read_frame(), (BINARY, bytes(300)))
            await raw.send(F(TEXT, b"frag ", fin=False) + F(PING, b"mid") + F(CONT, b"ment"))
            self.assertEqual(await raw.read_frame(), (PONG, b"mid"))
            self.assertEqual(await raw.read_frame(), (TEXT, b"frag ment"))
            await raw.send(F(CLOSE, struct.pack(">H", 1000)))
            self.assertEqual(await raw.close_code(), 1000)
            self.assertTrue(await raw.eof())
        finally:
            raw.abort()

    async def test_unmasked_frame_closes_1002(self):
        await self.expect_protocol_error(F(TEXT, b"not masked", mask=False))

    async def test_unmasked_first_frame_closes_1002(self):
        await self.expect_protocol_error(F(BINARY, b"\x01\x02", mask=False), valid_first=False)

    async def test_reserved_data_opcode_closes_1002(self):
        await self.expect_protocol_error(F(0x3, b"reserved"))

    async def test_reserved_control_opcode_closes_1002(self):
        await self.expect_protocol_error(F(0xB, b"reserved"))

    async def test_ping_of_126_bytes_closes_1002(self):
        await self.expect_protocol_error(F(PING, b"p" * 126))

    async def test_fragmented_ping_closes_1002(self):
        await self.expect_protocol_error(F(PING, b"p", fin=False))

    async def test_continuation_without_a_start_closes_1002(self):
        await self.expect_protocol_error(F(CONT, b"orphan"))

    async def test_new_message_inside_a_fragmented_one_closes_1002(self):
        await self.expect_protocol_error(F(TEXT, b"open", fin=False), F(TEXT, b"another"))

    async def test_reserved_bit_without_extension_closes_1002(self):
        await self.expect_protocol_error(F(TEXT, b"rsv1", rsv=0x4))

    async def test_64_bit_length_with_top_bit_set_closes_1002(self):
        head = bytes([0x82, 0xFF]) + struct.pack(">Q", (1 << 63) | 5) + os.urandom(4)
        await self.expect_protocol_error(head + b"xxxxx")

    async def test_a_frame_announcing_a_terabyte_closes_1009_at_once(self):
        raw = await self.open_raw()
        try:
            await raw.send(bytes([0x82, 0xFF]) + struct.pack(">Q", 1 << 40) + os.urandom(4) + b"abc")
            self.assertEqual(await raw.close_code(timeout=2), 1009)  # not after 1 TiB
            self.assertTrue(await raw.eof())
        finally:
            raw.abort()
        await self.fresh_connection_works()

    async def test_non_minimal_length_closes_1002(self):
        # 5 bytes written in the 16-bit form (RFC 6455 §5.2: the minimal number of bytes).
        await self.expect_protocol_error(bytes([0x81, 0xFE]) + struct.pack(">H", 5) + bytes(4) + b"short")

    async def test_header_dribbled_one_byte_at_a_time_is_relayed(self):
        raw = await self.open_raw()
        try:
            for payload in (b"dribble", os.urandom(300), os.urandom(70000)):
                frame = F(BINARY, payload)
                size = len(frame) - len(payload)  # 6, 8 or 14 header bytes
                # Pacing: the client's own rate, so that the pieces come in reads of their own.
                for i in range(size):
                    await raw.send(frame[i:i + 1])
                    await asyncio.sleep(0.01)
                # and the payload in a few uneven pieces
                cut = [size, size + 1, size + len(payload) // 3, len(frame)]
                for a, b in zip(cut, cut[1:]):
                    await raw.send(frame[a:b])
                    await asyncio.sleep(0.01)  # pacing, as above
                self.assertEqual(await raw.read_message(), (BINARY, payload))
            # Two frames and a half in one write, the rest later.
            data = F(TEXT, b"one") + F(TEXT, b"two") + F(TEXT, b"three")
            await raw.send(data[:-4])
            await asyncio.sleep(0.05)  # pacing, as above
            await raw.send(data[-4:])
            for word in (b"one", b"two", b"three"):
                self.assertEqual(await raw.read_frame(), (TEXT, word))
        finally:
            raw.abort()
        await self.fresh_connection_works()

    async def test_nearly_two_thousand_frames_in_one_write(self):
        raw = await self.open_raw()
        try:
            # 500 single-frame messages and 490 more in two fragments each, pings between
            # them, in one write (990 messages: within the burst of 1000).
            words = [f"w{i}".encode() for i in range(990)]
            data = b"".join(F(TEXT, w) for w in words[:500])
            data += b"".join(F(BINARY, w[:1], fin=False) + F(PING, b"") + F(CONT, w[1:])
                             for w in words[500:])
            await raw.send(data)
            for i, w in enumerate(words):
                self.assertEqual(await raw.read_message(), (TEXT if i < 500 else BINARY, w))
        finally:
            raw.abort()

    async def test_close_frame_dribbled_is_answered_and_its_code_counted(self):
        m0 = self.gw.metrics()
        raw = await self.open_raw()
        try:
            frame = F(CLOSE, struct.pack(">H", 1003) + b"dribbled")
            for i in range(len(frame)):
                await raw.send(frame[i:i + 1])
                await asyncio.sleep(0.005)  # pacing: one byte a read
            self.assertEqual(await raw.close_code(), 1003)
            self.assertTrue(await raw.eof())
        finally:
            raw.abort()
        # The gateway read the (masked) code across eight reads.
        m1 = self.gw.metrics()
        self.assertEqual(m1.value("tollgate_websocket_closes_total", code="1003", by="client")
                         - m0.value("tollgate_websocket_closes_total", code="1003", by="client"), 1)


if __name__ == "__main__":
    h.main()
