# frozen_string_literal: true
#
# tests/e2e/worker.rb over TLS, for the end-to-end test against the TLS Redis of
# `services.sh tls-start`:
#
#   REDIS_URL=rediss://127.0.0.1:PORT/0 REDIS_CA_FILE=DIR/tls/ca.crt \
#       sidekiq -r /abs/path/tests/support/sidekiq_tls.rb -q critical -q default ...
#
# Sidekiq 6.4 hands its redis options to Redis.new unchanged, and redis-rb 4.8
# verifies the server against ssl_params (OpenSSL::SSL::SSLContext#set_params),
# host name included. worker.rb configured the URL alone; this configures both
# sides again with the CA (configure_server runs its block at once in a server).
require_relative "../e2e/worker"

ssl_params = {ca_file: ENV.fetch("REDIS_CA_FILE")}
Sidekiq.configure_server do |config|
  config.redis = {url: ENV.fetch("REDIS_URL"), ssl_params: ssl_params}
end
Sidekiq.configure_client do |config|
  config.redis = {url: ENV.fetch("REDIS_URL"), ssl_params: ssl_params}
end
