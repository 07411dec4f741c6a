"""Real NSQ clients (go-nsq, nsqjs, pynsq) run the same checks against both nsqds."""
