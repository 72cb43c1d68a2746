# frozen_string_literal: true

require "securerandom"
require "active_record"

module Stagedrain
  # The staged_jobs table as a model, for staging rows by hand
  # (`Stagedrain::StagedJob.create!(job_class: "HardJob", args: [1])`) and for
  # the connection the adapters write through.
  #
  # jid and uuid are chosen here rather than by the column defaults: Rails
  # 6.1's create! reads back only id, which would leave both nil on the
  # record. id is never assigned, so it always comes from its sequence.
  class StagedJob < ActiveRecord::Base
    self.table_name = "staged_jobs"

    attribute :jid, default: -> { SecureRandom.hex(12) }
    attribute :uuid, default: -> { SecureRandom.uuid }
  end
end
