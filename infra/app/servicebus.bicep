// An optional Service Bus namespace for jobs to send to. Jobs authenticate with a shared access
// key (the 2016-03-01 API knows no other way), so local authentication stays on, and the key they
// get may only send.
param name string
param location string
param tags object = {}

resource namespace 'Microsoft.ServiceBus/namespaces@2024-01-01' = {
  name: name
  location: location
  tags: tags
  sku: {
    name: 'Standard' // topics need Standard
    tier: 'Standard'
  }
  properties: {
    minimumTlsVersion: '1.2'
    disableLocalAuth: false
  }
}

resource sendOnly 'Microsoft.ServiceBus/namespaces/authorizationRules@2024-01-01' = {
  parent: namespace
  name: 'scheduler-send'
  properties: {
    rights: ['Send']
  }
}

output name string = namespace.name
output sendKeyName string = sendOnly.name
