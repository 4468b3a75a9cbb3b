# Sourced by the setup benchmarks: serves CHECKPOINT_DIR as the repository
# bench/model in the Hub's paths from nginx (Debian's nginx-light), static
# files laid out by tests/hub/hub_server.py --write-static, so that the server
# is not what is measured. Sets HUB_URL; stops nginx on exit.
# Usage: start_nginx_hub SRC_DIR CHECKPOINT_DIR WORKDIR
start_nginx_hub() {
  local src=$1 ck=$2 w=$3
  rm -rf "$w/static" && python3 "$src/tests/hub/hub_server.py" --root "$ck" --repo bench/model --write-static "$w/static"
  local port=$((20000 + RANDOM % 20000))
  cat > "$w/nginx.conf" <<CONF
worker_processes 2;
pid $w/nginx.pid;
error_log $w/nginx.err;
events { worker_connections 256; }
http {
  access_log off;
  sendfile on;
  default_type application/octet-stream;
  client_body_temp_path $w/tmp; proxy_temp_path $w/tmp; fastcgi_temp_path $w/tmp; uwsgi_temp_path $w/tmp; scgi_temp_path $w/tmp;
  server { listen 127.0.0.1:$port; root $w/static; disable_symlinks off; }
}
CONF
  mkdir -p "$w/tmp"
  nginx -c "$w/nginx.conf"
  NGINX_PID_FILE="$w/nginx.pid"
  trap 'kill "$(cat "$NGINX_PID_FILE")" 2> /dev/null || true' EXIT
  HUB_URL="http://127.0.0.1:$port"
}
