# Sourced by .ci/run: makes sure headless Chromium (Debian's package) is installed for the trace
# viewer test (tests/trace_viewer.rs). Idempotent.
if [ -n "${KIT_CHROMIUM:-}" ] && [ -x "$KIT_CHROMIUM" ]; then
  return 0 2>/dev/null || exit 0
fi
if [ ! -x /usr/bin/chromium ]; then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
fi
/usr/bin/chromium --version
