// The external relay service's liveness file, as `nri-qos status` reads it (service.hpp
// read_service_status). Apart from src/nri/service.cpp so that the status command (and the
// fuzz build, which links the library without the relay) needs none of the service itself.
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "nri/service.hpp"

namespace nriqos::nri {

using nlohmann::json;

std::string prom_label(const std::string& v) {
    std::string r;
    for (char c : v) {
        if (c == '\\' || c == '"') r.push_back('\\');
        if (c == '\n') {
            r += "\\n";
            continue;
        }
        r.push_back(c);
    }
    return r;
}

json read_service_status(const std::string& path, const std::string& proc_root) {
    std::ifstream f(path);
    if (!f) {
        if (errno == ENOENT) return nullptr;
        return json{{"error", "cannot read " + path + ": " + strerror(errno)}};
    }
    std::stringstream ss;
    ss << f.rdbuf();
    json j = json::parse(ss.str(), nullptr, false);
    if (!j.is_object()) return json{{"error", path + ": not a JSON object"}};
    bool up = false;
    auto p = j.find("pid");
    if (p != j.end() && p->is_number_integer() && p->get<int64_t>() > 0) {
        // alive, and an nri-qos process (a pid reused by something else is not the relay)
        std::ifstream cmd(proc_root + "/" + std::to_string(p->get<int64_t>()) + "/cmdline");
        std::string argv0;
        std::getline(cmd, argv0, '\0');
        up = argv0.find("nri-qos") != std::string::npos;
    }
    j["up"] = up;
    return j;
}

}  // namespace nriqos::nri
