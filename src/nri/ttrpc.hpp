// ttrpc message framing and unary request/response envelopes, as used by NRI inside each
// logical mux connection.
//
// Source of the rules: github.com/containerd/ttrpc v1.2 channel.go (header), client.go
// (stream ids), server.go/services.go (status codes), request.proto (envelopes). A message is
//     [payload length: u32 BE][stream id: u32 BE][type: u8][flags: u8][payload]
// with the length limited to 4 MiB. Unary calls use type 1 (request) and 2 (response) with
// flags 0; the client allocates odd stream ids starting at 1, +2 per call; the response carries
// the request's stream id.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace nriqos::nri {

constexpr size_t kTtrpcHeaderSize = 10;
/// ttrpc `messageLengthMax` (4 MiB); larger messages are discarded by the receiver.
constexpr uint32_t kTtrpcMaxMessage = 4u << 20;

constexpr uint8_t kTtrpcRequest = 0x01;
constexpr uint8_t kTtrpcResponse = 0x02;
constexpr uint8_t kTtrpcData = 0x03;

/// gRPC status codes used by the relay (google.rpc.Code).
constexpr int kCodeOk = 0;
constexpr int kCodeUnknown = 2;
constexpr int kCodeResourceExhausted = 8;
constexpr int kCodeUnimplemented = 12;

/// ttrpc service names of NRI (package nri.pkg.api.v1alpha1).
extern const char* const kPluginService;  ///< "nri.pkg.api.v1alpha1.Plugin"
extern const char* const kRuntimeService;  ///< "nri.pkg.api.v1alpha1.Runtime"

/// One complete ttrpc message cut out of a connection's byte stream.
struct TtrpcMessage {
    uint32_t stream_id = 0;
    uint8_t type = 0;
    uint8_t flags = 0;
    std::string payload;  ///< empty when `oversized`
    bool oversized = false;  ///< header announced > kTtrpcMaxMessage; payload was discarded
    uint32_t announced_len = 0;
};

/// Per-connection reassembly of ttrpc messages from the byte pieces delivered by the mux.
///
/// append() buffers bytes; next() cuts out complete messages in order. A message longer than
/// kTtrpcMaxMessage is not buffered: its bytes are skipped and next() reports it once with
/// `oversized = true` (ttrpc answers such a request with RESOURCE_EXHAUSTED). The buffer is
/// released (capacity freed) whenever it becomes empty, so an idle connection holds no memory.
class TtrpcReassembler {
public:
    void append(const char* data, size_t len);
    /// Move the next complete message into `out`; false when none is complete yet.
    bool next(TtrpcMessage& out);
    /// Bytes currently buffered (a partial message); for tests and memory accounting.
    size_t buffered() const { return buf_.size() - pos_; }
    size_t capacity() const { return buf_.capacity(); }

private:
    void compact();
    std::string buf_;
    size_t pos_ = 0;  // start of unconsumed bytes in buf_
    uint64_t skip_ = 0;  // bytes of an oversized message still to discard
    bool have_oversized_ = false;
    TtrpcMessage oversized_;
};

/// Serialize a ttrpc message: 10-byte header + payload. Precondition: payload.size() <=
/// kTtrpcMaxMessage (callers check; larger is truncated to an error by the relay).
std::string ttrpc_encode(uint32_t stream_id, uint8_t type, uint8_t flags, const std::string& payload);

/// Decoded ttrpc request envelope (ttrpc Request message).
struct RequestEnvelope {
    std::string service;
    std::string method;
    std::string payload;
    int64_t timeout_nano = 0;
};

/// Parse a ttrpc Request payload; false on malformed protobuf.
bool decode_request(const std::string& bytes, RequestEnvelope& out);
/// Serialize a ttrpc Request envelope (used for RegisterPlugin and by tests).
std::string encode_request(const std::string& service, const std::string& method, const std::string& payload, int64_t timeout_nano = 0);

/// Serialize a successful ttrpc Response: no status field (as Go ttrpc servers send it) and
/// `payload` as the reply; an Empty reply therefore encodes to zero bytes.
std::string encode_ok_response(const std::string& reply_payload);
/// Serialize a failed ttrpc Response: status{code, message}, no payload.
std::string encode_error_response(int code, const std::string& message);

/// Decoded ttrpc Response (status code 0 when absent).
struct ResponseEnvelope {
    int code = 0;
    std::string message;
    std::string payload;
};
/// Parse a ttrpc Response payload; false on malformed protobuf.
bool decode_response(const std::string& bytes, ResponseEnvelope& out);

/// Client-side stream id allocator: 1, 3, 5, ... (ttrpc client.go).
class StreamIds {
public:
    uint32_t next() {
        uint32_t id = next_;
        next_ += 2;
        return id;
    }

private:
    uint32_t next_ = 1;
};

}  // namespace nriqos::nri
