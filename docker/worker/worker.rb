# frozen_string_literal: true
#
# The job classes the compose example's app stages. The relay pushed these jobs
# exactly as Sidekiq::Client would have.
#
# Redis: REDIS_URL (rediss:// in the example). REDIS_TLS_CA_FILE, when set, is
# the CA the server's certificate must chain to, passed to the Redis client as
# ssl_params ca_file (the redis gem under Sidekiq 6, redis-client under 7 both
# hand ssl_params to OpenSSL::SSL::SSLContext#set_params, which verifies the
# peer and its host name); unset, the system CAs are used, as for a managed Redis.
require "sidekiq"

def redis_options
  options = { url: ENV.fetch("REDIS_URL", "redis://127.0.0.1:6379/0") }
  ca_file = ENV.fetch("REDIS_TLS_CA_FILE", "")
  options[:ssl_params] = { ca_file: ca_file } unless ca_file.empty?
  options
end

Sidekiq.configure_server { |config| config.redis = redis_options }
Sidekiq.configure_client { |config| config.redis = redis_options }

class WelcomeMailer
  include Sidekiq::Job

  def perform(user_id, email)
    logger.info "welcome mail to user #{user_id} <#{email}> (jid #{jid})"
  end
end

class ChargeCard
  include Sidekiq::Job

  def perform(user_id, cents)
    logger.info "charged user #{user_id} #{cents} cents (jid #{jid})"
  end
end
