#pragma once
// Every file zeroplan writes goes through here: written to a temporary file beside the target,
// flushed, then renamed over it, so a failure leaves no partial file. An existing target is only
// replaced with force=true.
#include <string>
#include <string_view>

namespace zeroplan {

void write_file_atomically(const std::string& path, std::string_view content, bool force);

// For a SIGINT/SIGTERM handler: removes the temporary file of a write in progress, if any.
// Async-signal-safe (only unlink on a preallocated path).
void remove_pending_temporary_file() noexcept;

}  // namespace zeroplan
