// NRI connection multiplexer framing (the "trunk" socket between containerd and a plugin).
//
// Source of the rules: NRI pkg/net/multiplex/mux.go and ttrpc.go (identical from v0.6.1 to
// HEAD); summary in docs/native-nri.md. A frame is
//     [ConnID: u32 big-endian][payload length: u32 big-endian][payload]
// repeated back to back. ConnID 1 carries the Plugin service (containerd is the ttrpc client),
// ConnID 2 the Runtime service (the plugin is the client). Frame boundaries are independent of
// ttrpc message boundaries. Frames for connections that are not open are silently dropped.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace nriqos::nri {

/// Logical connection ids of the NRI mux (same numbers on both sides).
constexpr uint32_t kPluginServiceConn = 1;  ///< plugin serves nri.pkg.api.v1alpha1.Plugin
constexpr uint32_t kRuntimeServiceConn = 2;  ///< plugin calls nri.pkg.api.v1alpha1.Runtime

/// Size of the mux frame header in bytes.
constexpr size_t kMuxHeaderSize = 8;
/// Largest payload the Go mux sends or accepts (1 << 24 = 16 MiB, `maxPayloadSize`).
constexpr uint32_t kMuxMaxPayload = 1u << 24;
/// Largest payload we send in one frame: the Go receiver reads through a 4096-byte
/// bufio.Reader and fails (ENOMEM) on a frame larger than the caller's buffer.
constexpr size_t kMuxSendChunk = 4096;

/// Incremental decoder of the trunk byte stream.
///
/// feed() takes bytes in arbitrary splits (one byte at a time, several frames at once) and
/// hands payload bytes of every frame to the sink as soon as they arrive, tagged with their
/// ConnID. The decoder never buffers payload itself (only the 8-byte header), so memory stays
/// constant even for 16 MiB frames. Frames whose ConnID is not accepted by `is_open` are
/// skipped without calling the sink (Go mux behaviour).
class MuxDecoder {
public:
    /// Called with (conn id, pointer, length) for each piece of accepted payload; a single frame
    /// may be delivered in several pieces.
    using Sink = std::function<void(uint32_t conn, const char* data, size_t len)>;
    /// Decides whether a ConnID is open at the receiver; default: conns 1 and 2.
    using IsOpen = std::function<bool(uint32_t conn)>;

    explicit MuxDecoder(Sink sink, IsOpen is_open = {});

    /// Consume `len` bytes of the trunk stream. Returns false (and sets error()) on a frame
    /// whose length exceeds kMuxMaxPayload; the stream cannot be resynchronised after that, so
    /// the caller must close the trunk. Once failed, every later call returns false.
    bool feed(const char* data, size_t len);

    /// One-line description of the failure, empty while healthy.
    const std::string& error() const { return error_; }
    /// True when the decoder sits exactly between two frames (nothing partial buffered).
    bool at_frame_boundary() const { return hdr_len_ == 0 && remaining_ == 0; }
    /// Number of frames dropped because their ConnID was not open.
    uint64_t dropped_frames() const { return dropped_; }

private:
    Sink sink_;
    IsOpen is_open_;
    unsigned char hdr_[kMuxHeaderSize];
    size_t hdr_len_ = 0;
    uint32_t conn_ = 0;
    uint32_t remaining_ = 0;
    bool skipping_ = false;
    uint64_t dropped_ = 0;
    std::string error_;
};

/// Append the mux frames carrying `payload` on connection `conn` to `out`: a header and at
/// most `chunk` (default kMuxSendChunk, must be >0) payload bytes per frame. An empty payload
/// produces nothing (the Go mux never sends empty frames for ttrpc traffic).
void mux_encode(uint32_t conn, const std::string& payload, std::string& out, size_t chunk = kMuxSendChunk);

/// Write the 8-byte big-endian mux header for (conn, len) into `dst`.
void mux_put_header(unsigned char* dst, uint32_t conn, uint32_t len);

}  // namespace nriqos::nri
