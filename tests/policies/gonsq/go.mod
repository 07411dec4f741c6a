module nsqd-policies/gonsq

go 1.17

require github.com/nsqio/go-nsq v1.1.0

require github.com/golang/snappy v0.0.1 // indirect
