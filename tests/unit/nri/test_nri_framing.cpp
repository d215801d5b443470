// Unit tests of the NRI mux framing (src/nri/mux.*) and the ttrpc framing/envelopes
// (src/nri/ttrpc.*). Wire facts: docs/native-nri.md.
#include <catch2/catch.hpp>

#include <map>
#include <string>
#include <vector>

#include "nri/mux.hpp"
#include "nri/nri.pb.h"
#include "nri/ttrpc.hpp"

namespace {

namespace pb = ::nri::pkg::api::v1alpha1;

std::string bytes(std::initializer_list<int> b) {
    std::string s;
    for (int c : b) s.push_back(static_cast<char>(c));
    return s;
}

std::string pattern(size_t n, int seed) {
    std::string s(n, '\0');
    for (size_t i = 0; i < n; ++i) s[i] = static_cast<char>((i * 31 + seed) & 0xff);
    return s;
}

// Collects the payload bytes per connection.
struct Collector {
    std::map<uint32_t, std::string> got;
    nriqos::nri::MuxDecoder dec{[this](uint32_t c, const char* d, size_t n) { got[c].append(d, n); }};
};

}  // namespace

TEST_CASE("mux: frame header is big-endian conn id and length", "[nri][mux]") {
    std::string out;
    nriqos::nri::mux_encode(2, "abc", out);
    REQUIRE(out == bytes({0, 0, 0, 2, 0, 0, 0, 3}) + "abc");
}

TEST_CASE("mux: payloads are sent in chunks of at most 4096 bytes", "[nri][mux]") {
    std::string payload = pattern(10000, 1);
    std::string out;
    nriqos::nri::mux_encode(1, payload, out);
    REQUIRE(out.size() == 10000 + 3 * nriqos::nri::kMuxHeaderSize);
    // frames: 4096, 4096, 1808
    CHECK(out.substr(0, 8) == bytes({0, 0, 0, 1, 0, 0, 0x10, 0x00}));
    CHECK(out.substr(8 + 4096, 8) == bytes({0, 0, 0, 1, 0, 0, 0x10, 0x00}));
    CHECK(out.substr(2 * (8 + 4096), 8) == bytes({0, 0, 0, 1, 0, 0, 0x07, 0x10}));
    Collector c;
    REQUIRE(c.dec.feed(out.data(), out.size()));
    CHECK(c.got[1] == payload);
    // custom chunk size (used by tests to imitate small frames)
    std::string small;
    nriqos::nri::mux_encode(1, "0123456789", small, 3);
    CHECK(small.size() == 10 + 4 * 8);
    std::string empty;
    nriqos::nri::mux_encode(1, "", empty);
    CHECK(empty.empty());
}

TEST_CASE("mux: decoding is independent of how the stream is split", "[nri][mux]") {
    std::string stream;
    std::string p1 = pattern(5000, 7), p2 = "hello runtime", p3 = pattern(300, 9);
    nriqos::nri::mux_encode(1, p1, stream);
    nriqos::nri::mux_encode(2, p2, stream);
    stream += bytes({0, 0, 0, 1, 0, 0, 0, 0});  // empty frame is legal
    nriqos::nri::mux_encode(1, p3, stream);

    SECTION("all frames in one read") {
        Collector c;
        REQUIRE(c.dec.feed(stream.data(), stream.size()));
        CHECK(c.got[1] == p1 + p3);
        CHECK(c.got[2] == p2);
        CHECK(c.dec.at_frame_boundary());
    }
    SECTION("split into two reads at every byte boundary") {
        for (size_t cut = 0; cut <= stream.size(); ++cut) {
            Collector c;
            REQUIRE(c.dec.feed(stream.data(), cut));
            REQUIRE(c.dec.feed(stream.data() + cut, stream.size() - cut));
            REQUIRE(c.got[1] == p1 + p3);
            REQUIRE(c.got[2] == p2);
        }
    }
    SECTION("one byte per read") {
        Collector c;
        for (char ch : stream) REQUIRE(c.dec.feed(&ch, 1));
        CHECK(c.got[1] == p1 + p3);
        CHECK(c.got[2] == p2);
    }
}

TEST_CASE("mux: frames for connections that are not open are dropped", "[nri][mux]") {
    std::string stream;
    nriqos::nri::mux_encode(1, "one", stream);
    nriqos::nri::mux_encode(3, "three", stream);
    nriqos::nri::mux_encode(0, "zero", stream);
    nriqos::nri::mux_encode(2, "two", stream);
    Collector c;
    REQUIRE(c.dec.feed(stream.data(), stream.size()));
    CHECK(c.got.count(3) == 0);
    CHECK(c.got.count(0) == 0);
    CHECK(c.got[1] == "one");
    CHECK(c.got[2] == "two");
    CHECK(c.dec.dropped_frames() == 2);
}

TEST_CASE("mux: a frame longer than 16 MiB is rejected with a clear error", "[nri][mux]") {
    Collector ok;
    std::string max_hdr = bytes({0, 0, 0, 1, 0x01, 0, 0, 0});  // exactly 1<<24: allowed
    REQUIRE(ok.dec.feed(max_hdr.data(), max_hdr.size()));
    CHECK(ok.dec.error().empty());

    Collector bad;
    std::string hdr = bytes({0, 0, 0, 1, 0x01, 0, 0, 1});  // (1<<24)+1
    CHECK_FALSE(bad.dec.feed(hdr.data(), hdr.size()));
    CHECK_THAT(bad.dec.error(), Catch::Contains("16 MiB") && Catch::Contains("16777217"));
    std::string more = "x";
    CHECK_FALSE(bad.dec.feed(more.data(), 1));  // stays failed
    CHECK(bad.got.empty());
}

TEST_CASE("ttrpc: message header layout", "[nri][ttrpc]") {
    std::string m = nriqos::nri::ttrpc_encode(5, nriqos::nri::kTtrpcResponse, 0, "abc");
    CHECK(m == bytes({0, 0, 0, 3, 0, 0, 0, 5, 2, 0}) + "abc");
    std::string big = nriqos::nri::ttrpc_encode(0x01020304, nriqos::nri::kTtrpcRequest, 0, std::string(0x0105, 'z'));
    CHECK(big.substr(0, 10) == bytes({0, 0, 1, 5, 1, 2, 3, 4, 1, 0}));
}

TEST_CASE("ttrpc: reassembly across arbitrary splits", "[nri][ttrpc]") {
    std::string s = nriqos::nri::ttrpc_encode(1, nriqos::nri::kTtrpcRequest, 0, pattern(700, 3)) +
                    nriqos::nri::ttrpc_encode(3, nriqos::nri::kTtrpcRequest, 0, "") +
                    nriqos::nri::ttrpc_encode(5, nriqos::nri::kTtrpcResponse, 0, "xyz");
    for (size_t cut = 0; cut <= s.size(); ++cut) {
        nriqos::nri::TtrpcReassembler r;
        std::vector<nriqos::nri::TtrpcMessage> got;
        nriqos::nri::TtrpcMessage m;
        r.append(s.data(), cut);
        while (r.next(m)) got.push_back(m);
        r.append(s.data() + cut, s.size() - cut);
        while (r.next(m)) got.push_back(m);
        REQUIRE(got.size() == 3);
        REQUIRE(got[0].stream_id == 1);
        REQUIRE(got[0].payload == pattern(700, 3));
        REQUIRE(got[1].stream_id == 3);
        REQUIRE(got[1].payload.empty());
        REQUIRE(got[2].type == nriqos::nri::kTtrpcResponse);
        REQUIRE(got[2].payload == "xyz");
        REQUIRE(r.buffered() == 0);
        REQUIRE(r.capacity() < 64);  // buffer released after the last complete message
    }
}

TEST_CASE("ttrpc: a message over 4 MiB is skipped and reported once", "[nri][ttrpc]") {
    uint32_t len = nriqos::nri::kTtrpcMaxMessage + 1;
    std::string hdr = bytes({int(len >> 24), int((len >> 16) & 0xff), int((len >> 8) & 0xff), int(len & 0xff), 0, 0, 0, 7, 1, 0});
    nriqos::nri::TtrpcReassembler r;
    r.append(hdr.data(), hdr.size());
    std::string body(len, 'q');
    r.append(body.data(), 1000);
    nriqos::nri::TtrpcMessage m;
    REQUIRE(r.next(m));
    CHECK(m.oversized);
    CHECK(m.stream_id == 7);
    CHECK(m.announced_len == len);
    CHECK_FALSE(r.next(m));
    // the rest of the body is discarded in pieces, then normal messages continue
    r.append(body.data() + 1000, len - 1000 - 10);
    CHECK(r.buffered() == 0);
    std::string tail = body.substr(0, 10) + nriqos::nri::ttrpc_encode(9, nriqos::nri::kTtrpcRequest, 0, "ok");
    r.append(tail.data(), tail.size());
    REQUIRE(r.next(m));
    CHECK_FALSE(m.oversized);
    CHECK(m.stream_id == 9);
    CHECK(m.payload == "ok");
}

TEST_CASE("ttrpc: request envelope matches the containerd capture", "[nri][ttrpc]") {
    pb::RegisterPluginRequest reg;
    reg.set_plugin_name("pyref");
    reg.set_plugin_idx("10");
    std::string env = nriqos::nri::encode_request(nriqos::nri::kRuntimeService, "RegisterPlugin", reg.SerializeAsString());
    std::string want = bytes({0x0a, 0x1c}) + "nri.pkg.api.v1alpha1.Runtime" + bytes({0x12, 0x0e}) + "RegisterPlugin" +
                       bytes({0x1a, 0x0b, 0x0a, 0x05}) + "pyref" + bytes({0x12, 0x02}) + "10";
    CHECK(env.size() == 59);
    CHECK(env == want);
    nriqos::nri::RequestEnvelope d;
    REQUIRE(nriqos::nri::decode_request(nriqos::nri::encode_request("s", "m", "p", 1999972404), d));
    CHECK(d.service == "s");
    CHECK(d.method == "m");
    CHECK(d.payload == "p");
    CHECK(d.timeout_nano == 1999972404);
    CHECK_FALSE(nriqos::nri::decode_request(bytes({0x0a, 0x7f, 'x'}), d));  // truncated field
}

TEST_CASE("ttrpc: response envelopes and status codes", "[nri][ttrpc]") {
    CHECK(nriqos::nri::encode_ok_response("").empty());  // Empty reply: zero-length ttrpc payload
    pb::ConfigureResponse cr;
    cr.set_events(0x2b);
    CHECK(cr.SerializeAsString() == bytes({0x10, 0x2b}));
    CHECK(nriqos::nri::encode_ok_response(cr.SerializeAsString()) == bytes({0x12, 0x02, 0x10, 0x2b}));
    std::string err = nriqos::nri::encode_error_response(nriqos::nri::kCodeUnknown, "no");
    CHECK(err == bytes({0x0a, 0x06, 0x08, 0x02, 0x12, 0x02}) + "no");
    nriqos::nri::ResponseEnvelope r;
    REQUIRE(nriqos::nri::decode_response(err, r));
    CHECK(r.code == 2);
    CHECK(r.message == "no");
    REQUIRE(nriqos::nri::decode_response("", r));
    CHECK(r.code == 0);
    REQUIRE(nriqos::nri::decode_response(bytes({0x0a, 0x00, 0x12, 0x02, 0x10, 0x2b}), r));  // status {} = OK
    CHECK(r.code == 0);
    CHECK(r.payload == bytes({0x10, 0x2b}));
    CHECK(nriqos::nri::kCodeUnimplemented == 12);
}

TEST_CASE("ttrpc: client stream ids are odd and increasing", "[nri][ttrpc]") {
    nriqos::nri::StreamIds ids;
    CHECK(ids.next() == 1);
    CHECK(ids.next() == 3);
    CHECK(ids.next() == 5);
}
