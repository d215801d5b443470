// libFuzzer target: the relay's framing (src/nri/mux.*, src/nri/ttrpc.*) — the bytes containerd
// (or anything that can write to the plugin's socket) sends. The input is a trunk byte stream:
// mux frames → per-connection ttrpc reassembly → ttrpc messages → request / response envelopes
// (protobuf). The first input byte picks how the stream is cut into feed() calls.
//
// Oracles:
//  * the decoders never crash, leak or run away: a reassembler never buffers more than one
//    maximal message (header + 4 MiB) plus the piece just appended;
//  * splitting does not matter: the stream fed in one piece and in pieces (1 byte, 7 bytes,
//    a pseudo-random pattern) gives the same messages, the same dropped-frame count and the
//    same error;
//  * round trips: every complete message re-encodes (ttrpc_encode) to the bytes it came from,
//    and re-framed with mux_encode it decodes to the same payload again; a decoded request or
//    response envelope re-encodes to an envelope that decodes to the same fields.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "fuzz_common.hpp"
#include "nri/mux.hpp"
#include "nri/ttrpc.hpp"

namespace {

struct Msg {
    uint32_t conn, stream_id, announced;
    uint8_t type, flags;
    bool oversized;
    std::string payload;
    bool operator==(const Msg& o) const {
        return conn == o.conn && stream_id == o.stream_id && announced == o.announced && type == o.type && flags == o.flags &&
               oversized == o.oversized && payload == o.payload;
    }
};

struct Outcome {
    std::vector<Msg> msgs;
    uint64_t dropped = 0;
    std::string error;
    bool operator==(const Outcome& o) const { return msgs == o.msgs && dropped == o.dropped && error == o.error; }
};

/// Decode `in`, feeding it in pieces of the sizes `cut` returns (>= 1).
template <class Cut>
Outcome decode(const std::string& in, Cut cut) {
    Outcome out;
    nriqos::nri::TtrpcReassembler conns[2];
    nriqos::nri::MuxDecoder dec([&](uint32_t conn, const char* d, size_t n) {
        if (conn != nriqos::nri::kPluginServiceConn && conn != nriqos::nri::kRuntimeServiceConn)
            fuzz::die("payload delivered for a closed connection");
        nriqos::nri::TtrpcReassembler& r = conns[conn - 1];
        r.append(d, n);
        nriqos::nri::TtrpcMessage m;
        while (r.next(m)) out.msgs.push_back({conn, m.stream_id, m.announced_len, m.type, m.flags, m.oversized, m.payload});
        if (r.buffered() > nriqos::nri::kTtrpcHeaderSize + nriqos::nri::kTtrpcMaxMessage + n) fuzz::die("reassembler buffers more than one message");
    });
    size_t off = 0;
    while (off < in.size()) {
        size_t n = std::min(cut(), in.size() - off);
        if (!dec.feed(in.data() + off, n)) {
            out.error = dec.error();
            if (out.error.empty() || out.error.find('\n') != std::string::npos) fuzz::die("mux error not one line", out.error);
            if (dec.feed("x", 1)) fuzz::die("mux decoder accepted bytes after an error");
            break;
        }
        off += n;
    }
    out.dropped = dec.dropped_frames();
    return out;
}

void check_envelopes(const Msg& m) {
    if (m.oversized) {
        if (!m.payload.empty() || m.announced <= nriqos::nri::kTtrpcMaxMessage) fuzz::die("oversized message with a payload or a small length");
        return;
    }
    if (m.payload.size() != m.announced) fuzz::die("payload length differs from the header");
    // ttrpc framing round trip
    std::string wire = nriqos::nri::ttrpc_encode(m.stream_id, m.type, m.flags, m.payload);
    nriqos::nri::TtrpcReassembler r;
    r.append(wire.data(), wire.size());
    nriqos::nri::TtrpcMessage back;
    if (!r.next(back) || back.payload != m.payload || back.stream_id != m.stream_id || back.type != m.type || back.flags != m.flags)
        fuzz::die("ttrpc re-encoding does not round-trip");
    if (r.buffered() != 0) fuzz::die("ttrpc re-encoding left bytes behind");
    // mux framing round trip
    std::string trunk;
    nriqos::nri::mux_encode(m.conn, m.payload, trunk, 1 + m.stream_id % 300);
    std::string got;
    nriqos::nri::MuxDecoder d([&](uint32_t, const char* p, size_t n) { got.append(p, n); });
    if (!d.feed(trunk.data(), trunk.size()) || got != m.payload || !d.at_frame_boundary()) fuzz::die("mux re-encoding does not round-trip");
    // envelopes (protobuf): decode, re-encode, decode again
    nriqos::nri::RequestEnvelope req;
    if (nriqos::nri::decode_request(m.payload, req)) {
        nriqos::nri::RequestEnvelope again;
        if (!nriqos::nri::decode_request(nriqos::nri::encode_request(req.service, req.method, req.payload, req.timeout_nano), again) ||
            again.service != req.service || again.method != req.method || again.payload != req.payload || again.timeout_nano != req.timeout_nano)
            fuzz::die("request envelope does not round-trip");
    }
    nriqos::nri::ResponseEnvelope rsp;
    if (nriqos::nri::decode_response(m.payload, rsp)) {
        nriqos::nri::ResponseEnvelope again;
        std::string enc = rsp.code != 0 || !rsp.message.empty() ? nriqos::nri::encode_error_response(rsp.code, rsp.message)
                                                                : nriqos::nri::encode_ok_response(rsp.payload);
        if (!nriqos::nri::decode_response(enc, again) || again.code != rsp.code || again.message != rsp.message ||
            (rsp.code == 0 && rsp.message.empty() && again.payload != rsp.payload))
            fuzz::die("response envelope does not round-trip");
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    if (size == 0) return 0;
    uint8_t mode = data[0];
    std::string in(reinterpret_cast<const char*>(data + 1), size - 1);
    Outcome whole = decode(in, [&] { return in.size() ? in.size() : 1; });
    uint32_t state = 0x9e3779b9u ^ mode;
    auto rnd = [&] {
        state ^= state << 13;
        state ^= state >> 17;
        state ^= state << 5;
        return static_cast<size_t>(1 + state % 23);
    };
    Outcome pieces = (mode & 3) == 0   ? decode(in, [] { return size_t{1}; })
                     : (mode & 3) == 1 ? decode(in, [] { return size_t{7}; })
                                       : decode(in, rnd);
    if (!(pieces == whole)) fuzz::die("the result depends on how the stream is split");
    for (const Msg& m : whole.msgs) check_envelopes(m);
    return 0;
}
