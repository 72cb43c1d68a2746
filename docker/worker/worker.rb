# frozen_string_literal: true
#
# The job classes the compose example's app stages. Sidekiq reads REDIS_URL
# itself; the relay pushed these jobs exactly as Sidekiq::Client would have.
require "sidekiq"

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
