// ttrpc framing and envelopes, see ttrpc.hpp.
#include "nri/ttrpc.hpp"

#include <algorithm>

#include "nri/nri.pb.h"

namespace nriqos::nri {
namespace pb = ::nri::pkg::api::v1alpha1;

const char* const kPluginService = "nri.pkg.api.v1alpha1.Plugin";
const char* const kRuntimeService = "nri.pkg.api.v1alpha1.Runtime";

namespace {

uint32_t get_be32(const char* p) {
    auto u = reinterpret_cast<const unsigned char*>(p);
    return (uint32_t(u[0]) << 24) | (uint32_t(u[1]) << 16) | (uint32_t(u[2]) << 8) | uint32_t(u[3]);
}

void put_be32(std::string& s, uint32_t v) {
    s.push_back(static_cast<char>(v >> 24));
    s.push_back(static_cast<char>(v >> 16));
    s.push_back(static_cast<char>(v >> 8));
    s.push_back(static_cast<char>(v));
}

}  // namespace

void TtrpcReassembler::append(const char* data, size_t len) {
    if (skip_ > 0) {  // still discarding the body of an oversized message
        size_t n = static_cast<size_t>(std::min<uint64_t>(skip_, len));
        skip_ -= n;
        data += n;
        len -= n;
    }
    if (len > 0) buf_.append(data, len);
}

void TtrpcReassembler::compact() {
    if (pos_ >= buf_.size()) {
        std::string().swap(buf_);  // release the capacity: idle connections hold nothing
        pos_ = 0;
    } else if (pos_ > 0 && pos_ >= buf_.size() / 2) {
        buf_.erase(0, pos_);
        pos_ = 0;
    }
}

bool TtrpcReassembler::next(TtrpcMessage& out) {
    if (have_oversized_) {
        out = std::move(oversized_);
        oversized_ = TtrpcMessage();
        have_oversized_ = false;
        return true;
    }
    size_t avail = buf_.size() - pos_;
    if (skip_ > 0 || avail < kTtrpcHeaderSize) return false;
    const char* h = buf_.data() + pos_;
    uint32_t len = get_be32(h);
    uint32_t sid = get_be32(h + 4);
    uint8_t type = static_cast<uint8_t>(h[8]);
    uint8_t flags = static_cast<uint8_t>(h[9]);
    if (len > kTtrpcMaxMessage) {
        out = TtrpcMessage();
        out.stream_id = sid;
        out.type = type;
        out.flags = flags;
        out.oversized = true;
        out.announced_len = len;
        pos_ += kTtrpcHeaderSize;
        size_t drop = static_cast<size_t>(std::min<uint64_t>(len, buf_.size() - pos_));
        pos_ += drop;
        skip_ = len - drop;
        compact();
        return true;
    }
    if (avail < kTtrpcHeaderSize + len) return false;
    out.stream_id = sid;
    out.type = type;
    out.flags = flags;
    out.oversized = false;
    out.announced_len = len;
    out.payload.assign(h + kTtrpcHeaderSize, len);
    pos_ += kTtrpcHeaderSize + len;
    compact();
    return true;
}

std::string ttrpc_encode(uint32_t stream_id, uint8_t type, uint8_t flags, const std::string& payload) {
    std::string out;
    out.reserve(kTtrpcHeaderSize + payload.size());
    put_be32(out, static_cast<uint32_t>(payload.size()));
    put_be32(out, stream_id);
    out.push_back(static_cast<char>(type));
    out.push_back(static_cast<char>(flags));
    out += payload;
    return out;
}

bool decode_request(const std::string& bytes, RequestEnvelope& out) {
    pb::RpcRequest req;
    if (!req.ParseFromString(bytes)) return false;
    out.service = req.service();
    out.method = req.method();
    out.payload = std::move(*req.mutable_payload());
    out.timeout_nano = req.timeout_nano();
    return true;
}

std::string encode_request(const std::string& service, const std::string& method, const std::string& payload, int64_t timeout_nano) {
    pb::RpcRequest req;
    req.set_service(service);
    req.set_method(method);
    req.set_payload(payload);
    req.set_timeout_nano(timeout_nano);
    return req.SerializeAsString();
}

std::string encode_ok_response(const std::string& reply_payload) {
    pb::RpcResponse rsp;
    rsp.set_payload(reply_payload);
    return rsp.SerializeAsString();
}

std::string encode_error_response(int code, const std::string& message) {
    pb::RpcResponse rsp;
    rsp.mutable_status()->set_code(code);
    rsp.mutable_status()->set_message(message);
    return rsp.SerializeAsString();
}

bool decode_response(const std::string& bytes, ResponseEnvelope& out) {
    pb::RpcResponse rsp;
    if (!rsp.ParseFromString(bytes)) return false;
    out.code = rsp.has_status() ? rsp.status().code() : 0;
    out.message = rsp.has_status() ? rsp.status().message() : std::string();
    out.payload = std::move(*rsp.mutable_payload());
    return true;
}

}  // namespace nriqos::nri
