// NRI mux framing, see mux.hpp.
#include "nri/mux.hpp"

#include <algorithm>
#include <utility>

namespace nriqos::nri {

namespace {

uint32_t get_be32(const unsigned char* p) { return (uint32_t(p[0]) << 24) | (uint32_t(p[1]) << 16) | (uint32_t(p[2]) << 8) | uint32_t(p[3]); }

void put_be32(unsigned char* p, uint32_t v) {
    p[0] = static_cast<unsigned char>(v >> 24);
    p[1] = static_cast<unsigned char>(v >> 16);
    p[2] = static_cast<unsigned char>(v >> 8);
    p[3] = static_cast<unsigned char>(v);
}

}  // namespace

MuxDecoder::MuxDecoder(Sink sink, IsOpen is_open) : sink_(std::move(sink)), is_open_(std::move(is_open)) {
    if (!is_open_) {
        is_open_ = [](uint32_t c) { return c == kPluginServiceConn || c == kRuntimeServiceConn; };
    }
}

bool MuxDecoder::feed(const char* data, size_t len) {
    if (!error_.empty()) return false;
    while (len > 0) {
        if (remaining_ == 0 && hdr_len_ < kMuxHeaderSize) {
            size_t n = std::min(len, kMuxHeaderSize - hdr_len_);
            std::copy(data, data + n, hdr_ + hdr_len_);
            hdr_len_ += n;
            data += n;
            len -= n;
            if (hdr_len_ < kMuxHeaderSize) break;
            hdr_len_ = 0;
            conn_ = get_be32(hdr_);
            uint32_t plen = get_be32(hdr_ + 4);
            if (plen > kMuxMaxPayload) {
                error_ = "mux frame for connection " + std::to_string(conn_) + " announces " + std::to_string(plen) +
                         " payload bytes, more than the 16 MiB limit";
                return false;
            }
            remaining_ = plen;
            skipping_ = !is_open_(conn_);
            if (skipping_) ++dropped_;
            continue;
        }
        size_t n = std::min<size_t>(len, remaining_);
        if (!skipping_ && n > 0) sink_(conn_, data, n);
        data += n;
        len -= n;
        remaining_ -= static_cast<uint32_t>(n);
    }
    return true;
}

void mux_put_header(unsigned char* dst, uint32_t conn, uint32_t len) {
    put_be32(dst, conn);
    put_be32(dst + 4, len);
}

void mux_encode(uint32_t conn, const std::string& payload, std::string& out, size_t chunk) {
    if (chunk == 0) chunk = kMuxSendChunk;
    for (size_t off = 0; off < payload.size(); off += chunk) {
        size_t n = std::min(chunk, payload.size() - off);
        unsigned char hdr[kMuxHeaderSize];
        mux_put_header(hdr, conn, static_cast<uint32_t>(n));
        out.append(reinterpret_cast<const char*>(hdr), kMuxHeaderSize);
        out.append(payload, off, n);
    }
}

}  // namespace nriqos::nri
