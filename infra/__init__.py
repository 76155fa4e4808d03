"""The CDK app that deploys sweeper: one stack composing one construct per concern."""
