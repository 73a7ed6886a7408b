#!/usr/bin/env bash
# Build the one-folder app bundle dist/kmds-desktop/ from build_app.spec (PyInstaller).
#
# Usage: scripts/build_bundle.sh [--clean]     (--clean discards PyInstaller's cache: slower, from scratch)
# Prints the bundle's size and the build time on the last line. The build takes minutes: torch,
# ChromaDB, Qt and PostgreSQL are large. Outputs (build/, dist/) are not part of the source tree.
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-.venv/bin/python}"
DIST="${KMDS_BUNDLE_DIST:-dist}"
WORK="${KMDS_BUNDLE_WORK:-build/pyinstaller}"
clean=()
[ "${1:-}" = "--clean" ] && clean=(--clean)

if ! "$PY" -c 'import PyInstaller' 2>/dev/null; then
  echo "Installing PyInstaller into the virtual environment (the 'build' extra)..."
  "$PY" -m pip install --quiet 'pyinstaller>=6.5'
fi

start=$(date +%s)
"$PY" -m PyInstaller --noconfirm "${clean[@]}" --log-level WARN \
  --distpath "$DIST" --workpath "$WORK" build_app.spec
app="$DIST/kmds-desktop"

# Desktop integration beside the executable: the .desktop file, the icon, and a script that installs
# both for the current user with this folder's absolute path.
cp resources/kmds-desktop.desktop "$app/"
icon=$(ls resources/icons/kmds-desktop.png resources/icons/*.png 2>/dev/null | head -n 1 || true)
[ -n "$icon" ] && cp "$icon" "$app/kmds-desktop.png"
cat > "$app/install-desktop-entry.sh" <<'SH'
#!/usr/bin/env bash
# Add KMDS Desktop to the application menu of the current user (no root needed).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
apps="${XDG_DATA_HOME:-$HOME/.local/share}/applications"
icons="${XDG_DATA_HOME:-$HOME/.local/share}/icons/hicolor/256x256/apps"
mkdir -p "$apps" "$icons"
[ -f "$here/kmds-desktop.png" ] && cp "$here/kmds-desktop.png" "$icons/kmds-desktop.png"
sed -e "s|^Exec=.*|Exec=\"$here/kmds-desktop\" %f|" -e "s|^TryExec=.*|TryExec=$here/kmds-desktop|" \
  "$here/kmds-desktop.desktop" > "$apps/kmds-desktop.desktop"
echo "Installed $apps/kmds-desktop.desktop"
SH
chmod +x "$app/install-desktop-entry.sh"

seconds=$(( $(date +%s) - start ))
size_mb=$(du -sm "$app" | cut -f1)
echo "bundle: $app/kmds-desktop  size ${size_mb} MB  build ${seconds} s"
