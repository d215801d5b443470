// nri-qos-systemd: the one part of nri-qos linked with libsystemd (sd-bus). build/nri-qos is
// fully static and Debian ships libsystemd only as a shared library, so the hook runs this small
// dynamically linked companion (installed in /usr/libexec/nri-qos/) when a cgroup it writes on
// the systemd cgroup driver has unit properties, before writing the files — the order runc's
// systemd cgroup manager uses (opencontainers/cgroups systemd/v2.go UnifiedManager.Set: unit
// properties first, then the fs2 files).
//
// Protocol (src/event/systemd_unit.hpp): stdin holds one property a line,
//   UNIT <TAB> NAME <TAB> t <TAB> DECIMAL     (D-Bus uint64: CPUWeight, MemoryMax, ...)
//   UNIT <TAB> NAME <TAB> ay <TAB> HEX        (D-Bus byte array: AllowedCPUs, AllowedMemoryNodes)
// and stdout gets exactly one line per input line, in the same order: "ok" or "error REASON".
// The properties of one unit go in one org.freedesktop.systemd1.Manager.SetUnitProperties call
// with runtime=true (as runc: they last until the unit stops or the node reboots, and systemd
// re-applies them on daemon-reload); when that call fails, each property is retried alone, so
// the reason is the property's own. The bus: systemd's private socket /run/systemd/private
// (root only, no dbus-daemon needed: what systemctl uses as root), else the system bus.
// Exit status: 0 when every line was answered; 2 on a protocol error (nothing sent).
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <string>
#include <vector>

#include <systemd/sd-bus.h>

namespace {

/// Per D-Bus call: well inside the hook's own deadline (1 s, pipeline.hpp kDeadlineMs), so that a
/// busy or hung systemd (a daemon-reload in progress) fails the property ("Connection timed out"),
/// not the event; the file writes follow either way.
constexpr uint64_t kCallTimeoutUs = 300000;

struct Prop {
    std::string unit, name;
    bool bytes = false;
    uint64_t num = 0;
    std::vector<uint8_t> mask;
    std::string result;
};

bool parse_line(const std::string& line, Prop& p) {
    std::vector<std::string> f;
    size_t pos = 0;
    for (;;) {
        size_t tab = line.find('\t', pos);
        f.push_back(line.substr(pos, tab == std::string::npos ? std::string::npos : tab - pos));
        if (tab == std::string::npos) break;
        pos = tab + 1;
    }
    if (f.size() != 4 || f[0].empty() || f[1].empty() || f[3].empty()) return false;
    p.unit = f[0];
    p.name = f[1];
    if (f[2] == "t") {
        char* end = nullptr;
        errno = 0;
        p.num = std::strtoull(f[3].c_str(), &end, 10);
        return errno == 0 && *end == '\0' && f[3][0] != '-';
    }
    if (f[2] != "ay" || f[3].size() % 2) return false;
    p.bytes = true;
    for (size_t i = 0; i < f[3].size(); i += 2) {
        char* end = nullptr;
        std::string h = f[3].substr(i, 2);
        unsigned long b = std::strtoul(h.c_str(), &end, 16);
        if (*end != '\0') return false;
        p.mask.push_back(static_cast<uint8_t>(b));
    }
    return true;
}

std::string errtext(const sd_bus_error& e, int r) {
    if (sd_bus_error_is_set(&e)) return std::string(e.name) + ": " + (e.message ? e.message : "");
    return std::strerror(r < 0 ? -r : r);
}

/// SetUnitProperties(unit, runtime=true, props) for props[idx...]; "" or why not.
std::string set(sd_bus* bus, const std::vector<Prop>& props, const std::vector<size_t>& idx) {
    sd_bus_message* m = nullptr;
    sd_bus_message* reply = nullptr;
    sd_bus_error e = SD_BUS_ERROR_NULL;
    int r = sd_bus_message_new_method_call(bus, &m, "org.freedesktop.systemd1", "/org/freedesktop/systemd1", "org.freedesktop.systemd1.Manager",
                                           "SetUnitProperties");
    if (r >= 0) r = sd_bus_message_append(m, "sb", props[idx[0]].unit.c_str(), 1);
    if (r >= 0) r = sd_bus_message_open_container(m, 'a', "(sv)");
    for (size_t i : idx) {
        const Prop& p = props[i];
        if (r >= 0) r = sd_bus_message_open_container(m, 'r', "sv");
        if (r >= 0) r = sd_bus_message_append(m, "s", p.name.c_str());
        if (p.bytes) {
            if (r >= 0) r = sd_bus_message_open_container(m, 'v', "ay");
            if (r >= 0) r = sd_bus_message_append_array(m, 'y', p.mask.data(), p.mask.size());
        } else {
            if (r >= 0) r = sd_bus_message_open_container(m, 'v', "t");
            if (r >= 0) r = sd_bus_message_append(m, "t", p.num);
        }
        if (r >= 0) r = sd_bus_message_close_container(m);
        if (r >= 0) r = sd_bus_message_close_container(m);
    }
    if (r >= 0) r = sd_bus_message_close_container(m);
    std::string out;
    if (r < 0) out = std::string("cannot build the D-Bus message: ") + std::strerror(-r);
    else if ((r = sd_bus_call(bus, m, kCallTimeoutUs, &e, &reply)) < 0) out = errtext(e, r);
    sd_bus_error_free(&e);
    sd_bus_message_unref(reply);
    sd_bus_message_unref(m);
    return out;
}

/// The manager's bus: the private socket (root), else the system bus. Returns a connection or
/// nullptr with `why`.
sd_bus* connect(std::string& why) {
    sd_bus* bus = nullptr;
    int r = sd_bus_new(&bus);
    if (r >= 0) r = sd_bus_set_address(bus, "unix:path=/run/systemd/private");
    if (r >= 0) r = sd_bus_start(bus);
    if (r >= 0) return bus;
    const int rp = r;
    sd_bus_unref(bus);
    bus = nullptr;
    r = sd_bus_open_system(&bus);
    if (r >= 0) return bus;
    why = std::string("cannot connect to systemd: /run/systemd/private: ") + std::strerror(-rp) + "; system bus: " + std::strerror(-r);
    return nullptr;
}

}  // namespace

int main(int argc, char** argv) {
    if (argc > 1) {
        std::fprintf(stderr, "usage: %s < PROPERTIES (one \"UNIT\\tNAME\\tt|ay\\tVALUE\" a line)\n", argv[0]);
        return 2;
    }
    std::vector<Prop> props;
    std::string line;
    while (std::getline(std::cin, line)) {
        Prop p;
        if (!parse_line(line, p)) {
            std::fprintf(stderr, "nri-qos-systemd: bad line %zu\n", props.size() + 1);
            return 2;
        }
        props.push_back(std::move(p));
    }
    if (props.empty()) return 0;
    std::string why;
    sd_bus* bus = connect(why);
    // Units in the order they first appear, each unit's properties in one call.
    std::vector<bool> done(props.size(), false);
    for (size_t i = 0; i < props.size(); ++i) {
        if (done[i]) continue;
        std::vector<size_t> idx;
        for (size_t j = i; j < props.size(); ++j)
            if (!done[j] && props[j].unit == props[i].unit) idx.push_back(j), done[j] = true;
        if (!bus) {
            for (size_t j : idx) props[j].result = "error " + why;
            continue;
        }
        std::string e = set(bus, props, idx);
        if (e.empty() || idx.size() == 1) {
            for (size_t j : idx) props[j].result = e.empty() ? "ok" : "error " + e;
            continue;
        }
        for (size_t j : idx) {  // attribute the failure: each alone
            std::string ej = set(bus, props, {j});
            props[j].result = ej.empty() ? "ok" : "error " + ej;
        }
    }
    if (bus) sd_bus_flush_close_unref(bus);
    for (const auto& p : props) {
        std::string r = p.result;
        for (char& c : r)
            if (c == '\n' || c == '\r') c = ' ';
        std::printf("%s\n", r.c_str());
    }
    return 0;
}
