"""Django app "stagedrain.django": add it to INSTALLED_APPS for the StagedJob model (app label "stagedrain")."""
