require "test_helper"

# The test database got stagedrain's tables from db/schema.rb.
class StagingTest < ActiveSupport::TestCase
  test "perform_later stages a row in the test database" do
    job = ReceiptJob.perform_later("/dev/null", "from a test")
    assert_equal [["ReceiptJob", job.job_id]], Stagedrain::StagedJob.pluck(:job_class, :uuid)
  end
end
