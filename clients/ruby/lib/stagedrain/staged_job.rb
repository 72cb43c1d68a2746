# frozen_string_literal: true

require "securerandom"
require "active_record"
require "stagedrain/jsonb"

module Stagedrain
  # The staged_jobs table as a model, for staging rows by hand
  # (`Stagedrain::StagedJob.create!(job_class: "HardJob", args: [1])`) and for
  # the connection the adapters write through.
  #
  # jid and uuid are chosen here rather than by the column defaults: Rails
  # 6.1's create! reads back only id, which would leave both nil on the
  # record. id is never assigned, so it always comes from its sequence.
  class StagedJob < ActiveRecord::Base
    # args and options as the adapters write them: a Float stays a Float
    # for the worker (Jsonb.for_jsonb).
    class JsonbType < ActiveRecord::Type::Json
      def serialize(value)
        text = super
        text && Jsonb.for_jsonb(text)
      end
    end

    self.table_name = "staged_jobs"

    attribute :jid, default: -> { SecureRandom.hex(12) }
    attribute :uuid, default: -> { SecureRandom.uuid }
    attribute :args, JsonbType.new
    attribute :options, JsonbType.new
  end
end
